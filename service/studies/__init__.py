"""Studies: a question ("does a numeric loss beat ce on my data?") answered by the service.

`submit.py` takes a StudySpec and expands it into ordinary jobs and sweeps through the
same admission queue (nothing of its own on Ray), and gets, lists and cancels studies;
`progress.py` is the loop that moves each study on from its jobs' rows (tuned arms' runs
once their sweep ends, the comparison once every run has ended, the optional promotion);
`result.py` reads the runs' results into `jobs.stats.compare` and draws the learning
curves; `views.py` holds the response models. Routers, the dashboard and the CLI call
these and never each other.
"""
