"""The queue: which queued job runs next and how much one owner may use.

`routes.py` (/v1/usage) → `usage.py` (compute used) and `preempting.py` (the reconciler's side of
preemption) → `admission.py` (order and fit) → policy shapes (`ceilings.py`, `quotas.py`,
`priorities.py`, `preemption.py` the pure planner, `resources.py`).
"""
