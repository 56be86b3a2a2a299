"""Where files live and how they are read: NUMTUNE_HOME, its caches and the storage root
(`paths.py`), files named by a path or a pyarrow URI (`uri.py`), and verified copies of
registered versions (`artifacts.py`). Imports nothing else from the project: the contract
(`jobs.spec`) reads spec files through it."""
