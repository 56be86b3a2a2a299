"""Ray Tune sweeps over a job's loss and learning rate (`sweep.py`) and their trials table
and plot (`report.py`)."""
