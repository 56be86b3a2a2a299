"""What `numtune up` started, kept in `<home>/run/state.json` so that `down` (and a
later `up`) can find exactly those processes again."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from service.cli.processes import LaunchError


@dataclass
class State:
    """What `up` started, in `<home>/run/state.json`; `down` reads it back."""

    home: str
    api_url: str
    api_port: int
    api_host: str
    dev: bool
    serve_port: int
    ray_address: str
    api_pid: int | None = None
    ray_pid: int | None = None  # None: an external Ray (NUMTUNE_RAY_ADDRESS) we do not own
    ray_temp_dir: str | None = None
    ray_token_path: str | None = None
    ray_ports: dict[str, int] = field(default_factory=dict)
    started_at: float = field(default_factory=time.time)

    @staticmethod
    def path(home: Path) -> Path:
        return home / "run" / "state.json"

    @classmethod
    def load(cls, home: Path) -> State | None:
        path = cls.path(home)
        if not path.exists():
            return None
        try:
            return cls(**json.loads(path.read_text()))
        except (ValueError, TypeError) as error:
            raise LaunchError(f"{path} is damaged ({error}); remove it by hand") from error

    def save(self) -> None:
        path = self.path(Path(self.home))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)
