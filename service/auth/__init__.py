"""Who may call: bearer tokens and their scopes.

`routes.py` (/v1/tokens) → `use_cases.py` (revoke) → `access.py` (the token gate both the control
plane and the serving replicas admit callers with); `callers.py` is the dependency every REST
route takes for its caller; `entropy.py` judges a secret's strength at start and at token
creation.
"""
