"""References that are not language models, scored on a job's own split: for table tasks,
scikit-learn's histogram gradient boosting (`gbm.py`). A study shows them beside its arms,
outside its corrected family of tests."""

from jobs.reference.gbm import METHOD, fit_reference

__all__ = ["METHOD", "fit_reference"]
