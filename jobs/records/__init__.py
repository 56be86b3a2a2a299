"""The files that pass between `service/` and `jobs/`: one typed record each (`models.py`), a
run's folder that writes and reads them (`run_files.py`), and what produced a run
(`provenance.py`)."""
