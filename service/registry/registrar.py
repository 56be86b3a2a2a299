"""Registration as a durable step of a job's life, off the reconciler's thread.

The reconciler writes `registration = "pending"` in the same update that records a job
succeeded (the outbox); this loop registers each pending job's best checkpoint as a model
version (copying and hashing it), and on failure tries again later with a doubling delay.
It ends "done" (with the version's reference) or "failed" (with the error) once the error
is one a person must act on (the model name belongs to another owner, the checkpoint is
not a servable artifact) or the attempts are spent. Registering is idempotent (one version
per job and checkpoint), so a pass cut short and repeated adds nothing twice; with several
API processes only the holder of the `registrar` lease runs passes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from service.platform.loop import SupervisedLoop
from service.registry.files import ArtifactError
from service.store import JobRow, Lease, RegistrationOutbox
from service.store.models import ModelOwnedElsewhereError
from service.store.schema import ModelVersionRow

log = logging.getLogger(__name__)

# Errors that another attempt cannot mend: a person has to act (rename, fix the checkpoint).
FINAL_ERRORS: tuple[type[Exception], ...] = (ArtifactError, ModelOwnedElsewhereError)
MAX_DELAY_S = 600.0

Register = Callable[[JobRow], ModelVersionRow | None]


class Registrar(SupervisedLoop):
    name = "registrar"

    def __init__(
        self,
        outbox: RegistrationOutbox,
        register: Register,
        *,
        interval_s: float = 1.0,
        attempts: int = 8,
        retry_s: float = 5.0,
        lease: Lease | None = None,
    ):
        self.outbox = outbox
        self.register = register
        self.attempts = attempts
        self.retry_s = retry_s
        super().__init__(interval_s, lease)

    def run_once(self) -> None:
        for job in self.outbox.due():
            self.register_one(job)
        self.passed()

    def register_one(self, job: JobRow) -> None:
        """One attempt at one job's registration, its outcome written on the job."""
        attempt = job.registration_attempts + 1
        try:
            row = self.register(job)
        except FINAL_ERRORS as error:
            self._fail(job, attempt, error)
        except Exception as error:  # storage, database: worth another try
            if attempt >= self.attempts:
                self._fail(job, attempt, error)
                return
            delay = min(MAX_DELAY_S, self.retry_s * 2 ** (attempt - 1))
            at = datetime.now(UTC) + timedelta(seconds=delay)
            self.outbox.retry(job.id, attempt, _text(error), at)
            log.warning(
                "registering %s failed (attempt %d of %d), retry in %.0f s",
                *(job.id, attempt, self.attempts, delay),
                exc_info=True,
            )
        else:
            model = f"{row.name}:{row.version}" if row is not None else None
            self.outbox.done(job.id, attempt, model)
            log.info("job %s registered as %s (attempt %d)", job.id, model, attempt)

    def _fail(self, job: JobRow, attempt: int, error: Exception) -> None:
        self.outbox.failed(job.id, attempt, _text(error))
        log.error("registering %s failed for good after %d attempts: %s", job.id, attempt, error)


def _text(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"
