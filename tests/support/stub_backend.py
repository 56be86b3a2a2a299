"""A recording stand-in for the Ray backend, for unit tests of the service's own logic.

The integration and e2e suites run the real `RayJobsBackend` against a local Ray."""

from __future__ import annotations

from dataclasses import dataclass, field

from service.ray_backend import RayJobInfo, RayUnreachableError


@dataclass
class StubBackend:
    status: str = "RUNNING"
    log_text: str = ""
    reachable: bool = True
    submitted: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)

    def _check(self) -> None:
        if not self.reachable:
            raise RayUnreachableError("stub: Ray is down")

    def submit(self, job_id: str, kind: str, spec_json: str) -> None:
        self._check()
        self.submitted.append(job_id)

    def info(self, job_id: str) -> RayJobInfo:
        self._check()
        return RayJobInfo(self.status, None)

    def logs(self, job_id: str) -> str:
        self._check()
        return self.log_text

    def stop(self, job_id: str) -> None:
        self._check()
        self.stopped.append(job_id)

    def ping(self) -> None:
        self._check()
