"""Uploaded files (/v1/files) and what a job may read.

`routes.py` → `use_cases.py` → `uploads.py` (files on storage), `checks.py` (submit-time reads of a
job's data, shared fairly), `confinement.py` (data roots and model sources a job may name);
`schemas.py` holds the OpenAI-shaped bodies.
"""
