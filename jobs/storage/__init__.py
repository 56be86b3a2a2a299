"""Where files live and how they are read: NUMTUNE_HOME, its caches and the storage root
(`paths.py`), and verified copies of registered versions (`artifacts.py`). Imports nothing
else from the project."""
