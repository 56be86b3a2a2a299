"""Where a submitted job is tracked in MLflow: the spec's `tracking` as the service runs it.

A user may name an http(s) MLflow server. A local store (sqlite:///, file:///) is a file
the job would create wherever its path says, with the service's rights on the Ray nodes
(MLflow even creates missing folders), so only the operator may name one: the service's
NUMTUNE_MLFLOW_URI, written here into every spec that names no URI, so that the request and
the job's spec.json record where it was tracked. The owner tag is always the caller's.
"""

from __future__ import annotations

from jobs.spec import JobSpec, TuneSpec
from service.settings import Settings

Problems = list[dict[str, str]]
USER_SCHEMES = ("http://", "https://")


def tracked_job(spec: JobSpec, settings: Settings, owner: str) -> JobSpec:
    """`spec` with the service's URI where it names none and the caller as owner (as it
    came when neither names one and it names no owner: an untracked job's spec is left as
    it was)."""
    uri = spec.tracking.mlflow_uri or settings.mlflow_uri
    if uri is None and spec.tracking.owner is None:
        return spec
    tracking = spec.tracking.model_copy(update={"mlflow_uri": uri, "owner": owner})
    return spec.model_copy(update={"tracking": tracking})


def user_uri_problems(spec: JobSpec, prefix: str = "") -> Problems:
    uri = spec.tracking.mlflow_uri
    if uri is None or uri.startswith(USER_SCHEMES):
        return []
    message = "a job may name an http(s) MLflow server; local stores are the service's setting"
    return [{"field": f"{prefix}tracking.mlflow_uri", "message": message}]


def with_tracking(
    spec: JobSpec | TuneSpec, settings: Settings, owner: str
) -> tuple[JobSpec | TuneSpec, Problems]:
    """The spec as submitted to Ray (see the module's docstring), or the problems found."""
    if isinstance(spec, TuneSpec):
        problems = user_uri_problems(spec.base, "base.")
        return spec.model_copy(update={"base": tracked_job(spec.base, settings, owner)}), problems
    return tracked_job(spec, settings, owner), user_uri_problems(spec)
