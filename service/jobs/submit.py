"""Submitting a job or a sweep: what every submitted spec goes through before a row is
written (its files and models confined to the caller's, MLflow tracking as the service
sets it, the service's ceilings), then the queued row. POST /v1/jobs and /v1/tunes, the
OpenAI create and a study's base all take this one path; the reconciler submits the row
to Ray once it fits.

The spec arrives validated (at the edge: the request's body) and is written once: the
row keeps the typed spec it was dumped from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobs.spec import JobSpec, TuneSpec
from service.backends.ray_backend import Backend, RayUnreachableError
from service.errors import Conflict, Forbidden, InvalidSpec, QuotaExceeded
from service.files.confinement import FileResolver, Problems, confine
from service.files.uploads import Uploads
from service.jobs.run_storage import RunStorage
from service.jobs.tracking import with_tracking
from service.jobs.use_cases import scope_of
from service.queue.admission import Resources, does_not_fit, need
from service.queue.ceilings import over_ceilings
from service.queue.priorities import spec_priority
from service.registry import Registry
from service.settings import Settings
from service.store import FileStore, IdempotencyConflictError, JobRow, JobStore, Principal


@dataclass(frozen=True)
class Submission:
    settings: Settings
    registry: Registry
    files: FileStore
    uploads: Uploads
    jobs: JobStore
    backend: Backend | None = None  # asked for the cluster's size (never_fits)

    def resolver(self, who: Principal) -> FileResolver:
        """What a job spec's file ids (fine-tune) and its rows' image ids (vision) resolve
        to for this caller: confined stored locations of files uploaded for that purpose.
        Its `digests` keep the sha256 each upload recorded, by location: a file whose
        content passed its check once is not read again (service/files/checks.py)."""
        digests: dict[str, str] = {}

        def resolve(file_id: str, purpose: str) -> str | None:
            row = self.files.get(file_id, scope_of(who))
            if row is None or row.purpose != purpose:
                return None
            where = self.uploads.confined(row.location, row.owner)
            if where is not None:
                digests[where] = row.sha256
            return where

        resolve.digests = digests  # type: ignore[attr-defined]
        return resolve

    def checked(
        self, spec: JobSpec | TuneSpec, who: Principal
    ) -> tuple[JobSpec | TuneSpec, Problems]:
        """The spec as it will be stored and run, and every problem found (422 fields); a
        413 quota_exceeded while the caller's storage is full."""
        self.within_quota(who)
        settings = self.settings
        spec, problems = self.classed(spec, who)
        confined, found = confine(spec, settings, self.registry, who, self.resolver(who))
        problems += found
        tracked, tracking_problems = with_tracking(confined, settings, who.owner)
        problems += tracking_problems
        problems += over_ceilings(tracked, settings.ceilings)
        return tracked, problems

    def classed(
        self, spec: JobSpec | TuneSpec, who: Principal
    ) -> tuple[JobSpec | TuneSpec, Problems]:
        """The spec with its priority class written down (the admin's default when it names
        none); a 422 problem for a class the admin does not define, a 403 for one `who`
        may not use (NUMTUNE_PRIORITY_GRANTS)."""
        classes = self.settings.priorities
        asked = spec_priority(spec)
        where = "base.priority" if isinstance(spec, TuneSpec) else "priority"
        if asked is not None and (unknown := classes.unknown(asked)):
            return spec, [{"field": where, "message": unknown}]
        if asked is not None and not classes.allowed(asked, who.owner, who.is_admin):
            raise Forbidden(f"{where}: {classes.refusal(asked, who.owner)}")
        if asked is not None:
            return spec, []
        if isinstance(spec, TuneSpec):
            base = spec.base.model_copy(update={"priority": classes.default})
            return spec.model_copy(update={"base": base}), []
        return spec.model_copy(update={"priority": classes.default}), []

    def within_quota(self, who: Principal) -> None:
        """A 413 while the owner's uploaded files and run folders already take their storage
        quota: a new job would only add a run folder to them."""
        quota = self.settings.owner_quota_bytes
        runs = RunStorage(self.uploads.uri, self.files.db)
        used = self.files.used(who.owner) + runs.used(who.owner)
        if used >= quota:
            raise QuotaExceeded(
                f"your files and run folders take {used} bytes of your {quota}-byte storage "
                "quota; delete jobs (DELETE /v1/jobs/{id}) or files you no longer need"
            )

    def never_fits(self, spec: JobSpec, prefix: str = "") -> Problems:
        """A problem when the spec's workers need more than this cluster ever gives jobs (by
        Ray's last report, less what serving keeps), as admission would refuse each of its
        runs (`does_not_fit`). None when Ray has not reported or cannot be reached: the
        queue then refuses it, as it refuses a job."""
        try:
            capacity = self.backend.capacity() if self.backend is not None else None
        except RayUnreachableError:
            capacity = None
        reserved = Resources(self.settings.reserved_cpus)
        start = need(spec).start
        if capacity is None or start.fits_in(capacity.total - reserved):
            return []
        why = does_not_fit(spec, start, capacity.total, reserved)
        return [{"field": f"{prefix}scaling.cpus_per_worker", "message": why}]

    def record(
        self,
        spec: JobSpec | TuneSpec,
        kind: str,
        who: Principal,
        key: str | None,
        meta: dict[str, Any] | None = None,
    ) -> tuple[JobRow, bool]:
        """Confine, check and store a job (queued); (row, False) when `key` replays one."""
        spec, problems = self.checked(spec, who)
        if problems:
            raise InvalidSpec(problems)
        try:
            return self.jobs.create(
                kind=kind,
                name=spec.name,
                owner=who.owner,
                spec=spec,
                idempotency_key=key,
                meta=meta,
            )
        except IdempotencyConflictError as error:
            raise Conflict(str(error)) from error
