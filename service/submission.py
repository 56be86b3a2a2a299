"""What every submitted spec goes through before a row is written: its files and models
confined to the caller's, MLflow tracking as the service sets it, and the service's
ceilings. Jobs, sweeps and a study's expanded runs all take this one path."""

from __future__ import annotations

from jobs.spec import JobSpec, TuneSpec
from service.api.deps import Services
from service.api.files import resolver
from service.ceilings import over_ceilings
from service.confinement import Problems, confine
from service.store import Principal
from service.tracking import with_tracking


def checked(
    spec: JobSpec | TuneSpec, services: Services, who: Principal
) -> tuple[JobSpec | TuneSpec, Problems]:
    """The spec as it will be stored and run, and every problem found (422 fields)."""
    settings = services.settings
    confined, problems = confine(spec, settings, services.registry, who, resolver(services, who))
    tracked, tracking_problems = with_tracking(confined, settings, who.owner)
    problems += tracking_problems
    problems += over_ceilings(tracked, settings.ceilings)
    return tracked, problems
