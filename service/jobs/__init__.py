"""Jobs and sweeps: submit, follow, pause, cancel, read their logs (/v1/jobs, /v1/tunes).

`routes.py` → `use_cases.py`, `submit.py`, `pause.py` (what a caller can do) → the reconciler's
side (`reconciler.py`, `pausing.py`, `copying.py`) → parts (`cancel.py`, `logstream.py`,
`run_storage.py`, `tracking.py`) → shapes (`schemas.py`, `states.py`, the state machine).
"""
