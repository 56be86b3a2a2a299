"""Interval calibration: the record a model version carries (`record.py`, pydantic alone: the
control plane reads it), the conformal math (`conformal.py`), interval metrics
(`intervals.py`) and the held-out run at the end of a job (`held_out.py`)."""
