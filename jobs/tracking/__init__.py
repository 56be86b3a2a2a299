"""MLflow tracking, on only with a tracking URI: a job's run (`job.py`) and a sweep's parent
run with its trials (`sweep.py`). mlflow itself is imported only where a URI is set."""
