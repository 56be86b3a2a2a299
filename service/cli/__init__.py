"""`numtune`, the command line: `main.py` the commands, `rest.py` and `models.py` the
ones that call the REST API, `launcher.py` and `ray_head.py` `numtune up`/`down` on one
machine, `processes.py` the detached children they start, `client.py` the HTTP client
and token lookup, `progress.py` a job's live progress, `demo.py` `make demo`."""

from service.cli.main import main

__all__ = ["main"]
