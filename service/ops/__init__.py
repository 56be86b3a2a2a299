"""The use cases: what a caller can do, one module per resource, each taking only the
services it needs. The REST routers (`service/api/`), the OpenAI view, the dashboard
(`service/web/`) and, through REST, the CLI call these and never each other; these never
import a router, and reach Ray, SQL and storage only through the parts below them.

`jobs.py` (get, list, cancel, forget a job or sweep), `submit.py` (check and record a
submitted spec), `fine_tuning.py` (OpenAI's fine-tuning API over the jobs), `files.py`
(uploads), `models.py` (the registry: versions, aliases), `studies.py` (submit, read,
cancel a study), `tokens.py` (revoke a token).
"""
