"""Where a submitted job is tracked in MLflow: the spec's `tracking` as the service runs it.

A user may name the service's own MLflow URI or an http(s) server on the operator's list
(NUMTUNE_MLFLOW_ALLOWED_SERVERS, compared by scheme, host and port): any other URL would
make the Ray nodes call an address of the submitter's choosing. A local store (sqlite:///,
file:///) is a file the job would create wherever its path says, with the service's rights
on the Ray nodes (MLflow even creates missing folders), so only the operator may name one:
the service's NUMTUNE_MLFLOW_URI, written into every spec that names no URI by the jobs'
own `with_tracking_uri` (jobs/tracking/job.py: the one function that decides a job's URI),
so that the request and the job's spec.json record where it was tracked. The owner tag is
always the caller's.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from jobs.spec import JobSpec, TuneSpec
from jobs.tracking.job import TRACKING_ENV, with_tracking_uri
from service.settings import Settings

Problems = list[dict[str, str]]
USER_SCHEMES = ("http", "https")


def _origin(uri: str) -> tuple[str, str]:
    parts = urlsplit(uri.strip())
    return parts.scheme.lower(), parts.netloc.lower()


def allowed_server(uri: str, settings: Settings) -> bool:
    """Whether a user may send a job's tracking to `uri`: the service's own URI, or an
    http(s) URI whose origin is on the operator's list."""
    if uri == settings.mlflow_uri:
        return True
    scheme, netloc = _origin(uri)
    listed = (settings.mlflow_allowed_servers or "").split(",")
    return (
        scheme in USER_SCHEMES
        and bool(netloc)
        and (scheme, netloc) in {_origin(server) for server in listed if server.strip()}
    )


def tracked_job(spec: JobSpec, settings: Settings, owner: str) -> JobSpec:
    """`spec` with the service's URI where it names none and the caller as owner (as it
    came when neither names one and it names no owner: an untracked job's spec is left as
    it was)."""
    tracked = with_tracking_uri(spec, {TRACKING_ENV: settings.mlflow_uri})
    if tracked.tracking.mlflow_uri is None and spec.tracking.owner is None:
        return spec
    tracking = tracked.tracking.model_copy(update={"owner": owner})
    return tracked.model_copy(update={"tracking": tracking})


def user_uri_problems(spec: JobSpec, settings: Settings, prefix: str = "") -> Problems:
    uri = spec.tracking.mlflow_uri
    if uri is None or allowed_server(uri, settings):
        return []
    message = (
        "a job may name the service's MLflow URI or a server on NUMTUNE_MLFLOW_ALLOWED_SERVERS; "
        "local stores are the service's setting"
    )
    return [{"field": f"{prefix}tracking.mlflow_uri", "message": message}]


def with_tracking(
    spec: JobSpec | TuneSpec, settings: Settings, owner: str
) -> tuple[JobSpec | TuneSpec, Problems]:
    """The spec as submitted to Ray (see the module's docstring), or the problems found."""
    if isinstance(spec, TuneSpec):
        problems = user_uri_problems(spec.base, settings, "base.")
        return spec.model_copy(update={"base": tracked_job(spec.base, settings, owner)}), problems
    return tracked_job(spec, settings, owner), user_uri_problems(spec, settings)
