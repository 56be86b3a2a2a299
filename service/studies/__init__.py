"""Studies: a question ("does a numeric loss beat ce on my data?") answered by the service.

A study's own machinery; what a caller does with one (submit, get, list, cancel) is the
use case `service/studies/use_cases.py`. `expand.py` turns a StudySpec into ordinary jobs and
sweeps through the same admission queue (nothing of its own on Ray); `progress.py` is the
loop that moves each study on from its jobs' rows (tuned arms' runs once their sweep ends,
the comparison once every run has ended, the optional promotion) and stops a cancelled
study's jobs; `result.py` reads the runs' results into `jobs.stats.compare` and draws the
learning curves; `intervals.py` reads each run's calibrated interval (coverage, width,
interval score) for the per-arm summary and the secondary tests; `views.py` holds the
response models.
"""
