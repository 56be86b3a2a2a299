"""OpenAI's fine-tuning API (/v1/fine_tuning/jobs) as a view over numtune's jobs.

`routes.py` → `use_cases.py` → `views.py` (a create becomes a JobSpec; a job reads as a
fine-tuning job); `schemas.py` holds OpenAI's shapes.
"""
