"""The study loop: moves every running study on from its jobs' rows, and nothing else.

Each pass reads the studies still followed (`running`, `cancelling`) and their jobs; all
state is in the database, so after an API restart the next pass goes on where the last
one stopped. For a running study with `tune_lr`, nothing but ce's learning-rate sweep runs
until it succeeds: then every other job is added at the rate it chose (its failure fails
the study). A tuned arm whose sweep succeeded gets its evaluation runs (the sweep's best
loss values, on every seed, at the learning rate the sweep trained at); once every run has
ended and no sweep is pending, the comparison is computed and stored, and with `promote`
the winning arm's best run is registered and the alias moved to it. A `cancelling` study
has its remaining jobs cancelled. With several API processes only the holder of the
`studies` lease runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from jobs.spec import BASELINE, HIGHER_IS_BETTER, LossSpec, StudySpec, TunedArm
from service.backends.ray_backend import RayUnreachableError
from service.jobs import cancel as cancelling
from service.jobs.states import TERMINAL
from service.platform.loop import SupervisedLoop
from service.registry import ArtifactError, ModelNotFound
from service.services import Services
from service.store import JobRow, Lease, StudyRow, StudyStore
from service.store.models import ModelOwnedElsewhereError, VersionMissingError
from service.studies import result as results
from service.studies.expand import NewJob, arm_jobs, is_lr_sweep, run_job

log = logging.getLogger(__name__)
ALPHA = 0.05  # a promotion needs the arm's Holm-adjusted p below this


def tuned_runs(spec: StudySpec, study: StudyRow, jobs: dict[str, JobRow]) -> list[NewJob]:
    """Evaluation runs for each arm whose sweep succeeded and that has none yet: a tuned
    arm's, or with `tune_lr.per_arm` any arm's (ce's and fixed arms' over lr alone)."""
    new: list[NewJob] = []
    started = {run["arm"] for run in study.runs if run["kind"] == "job"}
    for run in study.runs:
        sweep = jobs.get(run["job_id"])
        if run["kind"] != "tune" or run["arm"] in started:
            continue
        if sweep is None or sweep.status != "succeeded":
            continue
        best = (sweep.result or {}).get("best_config") or {}
        new += swept_runs(spec, run["arm"], best, sweep.job_spec.train.lr)
    return new


def swept_runs(
    spec: StudySpec, label: str, best: dict[str, Any], trained_at: float
) -> list[NewJob]:
    """An arm's evaluation runs, one a seed, once its sweep chose `best` (having trained at
    `trained_at`); none for a sweep that gates no runs (`swept_loss`)."""
    swept = swept_loss(spec, label, best, trained_at)
    if swept is None:
        return []
    loss, lr = swept
    return [run_job(spec, label, loss, seed, lr) for seed in spec.seeds]


def swept_loss(
    spec: StudySpec, label: str, best: dict[str, Any], trained_at: float
) -> tuple[LossSpec, float | None] | None:
    """The loss and learning rate an arm's runs take from its sweep (best config, and the
    rate it `trained_at`); None for a sweep that gates no runs (ce's rate sweep without
    `tune_lr.per_arm`: the study loop's first step handles it)."""
    arm = spec.arm(label)
    if spec.per_arm_lr:
        # Its own rate, as its own sweep chose it (every per-arm sweep searches lr).
        rate = best.get("lr")
        lr = float(rate) if isinstance(rate, int | float) and is_rate(rate) else None
        if lr is None:  # every per-arm sweep searches lr: its best config names one
            log.warning("study arm %s: its sweep chose no learning rate %s", label, best)
        if isinstance(arm, TunedArm):
            return spec.tuned_loss(arm, best), lr
        return (arm if arm is not None else LossSpec(name=BASELINE)), lr
    if not isinstance(arm, TunedArm):
        return None
    # At ce's swept rate, as the sweep itself trained (tune_lr); else the base's.
    return spec.tuned_loss(arm, best), (trained_at if spec.tune_lr is not None else None)


def after_lr_sweep(
    spec: StudySpec, study: StudyRow, jobs: dict[str, JobRow]
) -> tuple[list[NewJob], str | None]:
    """For a study that holds only ce's learning-rate sweep: every other job, at the rate
    it chose, once it succeeded; why the study fails, when it ended without one; nothing
    while it runs."""
    run = study.runs[0]
    row = jobs.get(run["job_id"])
    if row is None:
        ended = "was deleted"
    elif row.status not in TERMINAL:
        return [], None
    elif row.status != "succeeded":
        ended = row.status + (f": {row.detail}" if row.detail else "")
    else:
        best = (row.result or {}).get("best_config") or {}
        if is_rate(best.get("lr")):
            return arm_jobs(spec, float(best["lr"])), None
        ended = f"succeeded with no learning rate in its best config {best}"
    return [], (
        f"ce's learning-rate sweep {run['job_id']} {ended}; every arm trains at the rate it "
        "chooses (tune_lr), so no run was started"
    )


def is_rate(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1


def pending(study: StudyRow, jobs: dict[str, JobRow]) -> int:
    """Jobs of the study that have not ended (a deleted job has ended)."""
    return sum(
        1 for run in study.runs if (row := jobs.get(run["job_id"])) and row.status not in TERMINAL
    )


def winner(spec: StudySpec, comparison: dict[str, Any]) -> str | None:
    """The arm to promote: significantly better than ce after Holm, the best mean diff."""
    better = HIGHER_IS_BETTER[spec.primary]
    found = []
    for arm in comparison["arms"]:
        test = arm.get("vs_ce") or {}
        p, diff = test.get("p_holm"), test.get("diff")
        if harmed(arm.get("primary_tests") or []):
            continue  # worse on another primary metric: no winner
        if p is not None and diff is not None and p < ALPHA and (diff > 0) == better and diff:
            found.append((diff if better else -diff, arm["arm"]))
    return max(found)[1] if found else None


def harmed(tests: list[dict[str, Any]]) -> bool:
    """Some primary test shows the arm worse than ce after Holm."""
    return any(
        t.get("p_holm") is not None and t["p_holm"] < ALPHA and t.get("diff")
        and (t["diff"] > 0) != t.get("higher_is_better", True)
        for t in tests
    )  # fmt: skip


def promote(
    services: Services, spec: StudySpec, study: StudyRow, outcome: dict[str, Any], alias: str
) -> dict[str, Any]:
    """Register the winning arm's best run and point `alias` at it; what was done or why
    not, for the result (a failure here never fails the study)."""
    comparison = outcome.get("comparison")
    arm = winner(spec, comparison) if comparison else None
    if arm is None:
        return {
            "alias": alias,
            "done": False,
            "why": "no arm is significantly better than ce",
        }
    runs = [r for r in outcome["runs"] if r["arm"] == arm and r.get("status") == "succeeded"]
    metric = spec.primary
    better = HIGHER_IS_BETTER[metric]
    scored = [r for r in runs if r["metrics"].get(metric) is not None]
    best = (max if better else min)(scored, key=lambda r: r["metrics"][metric]) if scored else None
    row = services.jobs.get(best["job_id"]) if best else None
    if row is None:
        return {"alias": alias, "done": False, "arm": arm, "why": "its runs have no score"}
    try:
        version = services.registry.register(name=spec.register_as, owner=study.owner, job=row)
        services.registry.set_alias(spec.register_as, alias, version.version)
    except (
        ArtifactError,
        ModelNotFound,
        ModelOwnedElsewhereError,
        VersionMissingError,
        OSError,
    ) as error:
        log.warning("study %s: promotion failed: %s", study.id, error)
        return {"alias": alias, "done": False, "arm": arm, "why": str(error)[:500]}
    return {
        "alias": alias,
        "done": True,
        "arm": arm,
        "job_id": row.id,
        "model": spec.register_as,
        "version": version.version,
    }


def stop_jobs(
    studies: StudyStore, canceller: cancelling.Canceller, study: StudyRow, by: str
) -> bool:
    """Cancel every job of the study that has not ended; False when one could not be
    stopped now (Ray unreachable, contended): the study loop tries again."""
    done = True
    for job in studies.jobs_of(study).values():
        if job.status in TERMINAL:
            continue
        try:
            canceller.cancel(job, by)
        except (cancelling.AlreadyEndedError, cancelling.JobGoneError):
            continue  # it ended by itself: nothing to stop
        except (cancelling.CancelContendedError, RayUnreachableError) as error:
            log.warning("study %s: could not cancel %s yet: %s", study.id, job.id, error)
            done = False
    return done


def advance(services: Services, study: StudyRow, record_end: Callable[[JobRow], object]) -> None:
    """One step of one study (see the module's docstring)."""
    store = services.studies
    if study.status == "cancelling":
        canceller = cancelling.Canceller(services.jobs, services.backend, record_end)
        if stop_jobs(store, canceller, study, study.owner):
            store.transition(study.id, "cancelling", "cancelled")
        return
    spec = study.spec
    jobs = store.jobs_of(study)
    if spec.tune_lr is not None and not spec.per_arm_lr and all(map(is_lr_sweep, study.runs)):
        new, why = after_lr_sweep(spec, study, jobs)
        if why is not None:
            store.transition(study.id, "running", "failed", detail=why[:2000])
            log.info("study %s failed: %s", study.id, why)
        elif new:
            store.add_runs(study, new)  # False: cancelled meanwhile; the next pass sees it
        return
    new = tuned_runs(spec, study, jobs)
    if new:
        store.add_runs(study, new)  # False: cancelled meanwhile; the next pass sees it
        return
    if pending(study, jobs):
        return
    outcome = results.build(spec, study, jobs, services.settings.storage_root)
    if outcome["comparison"] is None:
        detail = "; ".join(f"{arm}: {why}" for arm, why in outcome["missing"].items())
        store.transition(
            study.id,
            "running",
            "failed",
            result=outcome,
            detail=f"nothing to compare ({detail})"[:2000],
        )
        return
    if spec.promote is not None:
        outcome["promoted"] = promote(services, spec, study, outcome, spec.promote)
    store.transition(study.id, "running", "succeeded", result=outcome)
    log.info("study %s succeeded", study.id)


class StudyLoop(SupervisedLoop):
    name = "studies"

    def __init__(
        self,
        services: Services,
        record_end: Callable[[JobRow], object],
        interval_s: float,
        lease: Lease | None = None,
    ):
        self.services = services
        self.record_end = record_end
        super().__init__(interval_s, lease)

    def run_once(self) -> None:
        try:
            studies = self.services.studies.followed()
        except SQLAlchemyError:
            log.exception("studies: database unavailable")
            return
        for study in studies:
            self.isolated(study, lambda s: advance(self.services, s, self.record_end))
        self.forget_all_but({s.id for s in studies})
        self.passed()
