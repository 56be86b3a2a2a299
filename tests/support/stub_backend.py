"""A recording stand-in for the Ray backend, for unit tests of the service's own logic.

The integration and e2e suites run the real `RayJobsBackend` against a local Ray."""

from __future__ import annotations

from dataclasses import dataclass, field

from service.backends.ray_backend import RayJobInfo, RayJobMissingError, RayUnreachableError
from service.queue.admission import Capacity, Resources


@dataclass
class StubBackend:
    status: str = "RUNNING"
    log_text: str = ""
    reachable: bool = True
    submitted: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    # Per-job Ray status, over `status`.
    statuses: dict[str, str] = field(default_factory=dict)
    # The cluster: its total, and what is free besides what our submitted jobs hold.
    total: Resources = field(default_factory=lambda: Resources(8.0))
    available: Resources | None = None  # None: the total
    submit_error: Exception | None = None  # raised by submit() (e.g. OSError(ENOSPC))
    stop_error: Exception | None = None  # raised by stop()
    # Submission ids Ray has no record of (its head was replaced): info() answers 404.
    forgotten: set[str] = field(default_factory=set)

    def _check(self) -> None:
        if not self.reachable:
            raise RayUnreachableError("stub: Ray is down")

    def submit(
        self, job_id: str, kind: str, spec_json: str, submission_id: str | None = None
    ) -> None:
        self._check()
        if self.submit_error is not None:
            raise self.submit_error
        self.submitted.append(submission_id or job_id)

    def info(self, job_id: str) -> RayJobInfo:
        self._check()
        if job_id in self.forgotten:
            raise RayJobMissingError(job_id)
        return RayJobInfo(self.statuses.get(job_id, self.status), None)

    def logs(self, job_id: str) -> str:
        self._check()
        return self.log_text

    def stop(self, job_id: str) -> None:
        self._check()
        if self.stop_error is not None:
            raise self.stop_error
        self.stopped.append(job_id)

    def ping(self) -> None:
        self._check()

    def capacity(self) -> Capacity | None:
        self._check()
        return Capacity(self.total, self.available or self.total)
