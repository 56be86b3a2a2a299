"""Liveness, readiness and Prometheus metrics: `routes.py` over `observability.py`."""
