"""Registered models as one caller sees them: list, read, register a checkpoint of a
succeeded job as the next version, point an alias, delete an alias or a version. Another
owner's model reads as missing (404) whatever the caller tries; the REST routes and the
dashboard's registry page both go through these."""

from __future__ import annotations

from service.errors import Conflict, InvalidRequest, NotFound
from service.jobs.use_cases import scope_of
from service.registry import (
    ArtifactError,
    ModelNotFound,
    RegisteredElsewhereError,
    Registry,
    VersionInfo,
)
from service.store import JobStore, Principal
from service.store.models import (
    AliasInUseError,
    ModelListing,
    ModelOwnedElsewhereError,
    VersionMissingError,
    VersionTakenError,
)


def listings(registry: Registry, who: Principal) -> list[ModelListing]:
    """The caller's models (an admin's: everyone's), by name."""
    return registry.listings(scope_of(who))


def visible(registry: Registry, name: str, who: Principal) -> ModelListing:
    """The model with its versions and aliases, if the caller may see it; else 404."""
    found = registry.listings(name=name)
    if not found or (found[0].model.owner != who.owner and not who.is_admin):
        raise NotFound(f"no model {name!r}")
    return found[0]


def versions(registry: Registry, listing: ModelListing) -> list[VersionInfo]:
    """Every version of a listed model as the API shows it, oldest first."""
    return [registry.info(v, listing.aliases) for v in listing.versions]


def version(registry: Registry, name: str, number: int, who: Principal) -> VersionInfo:
    visible(registry, name, who)
    try:
        return registry.info(registry.resolve(f"{name}:{number}"))
    except ModelNotFound as error:
        raise NotFound(str(error)) from error


def register(
    registry: Registry,
    jobs: JobStore,
    name: str,
    job_id: str,
    checkpoint: str | None,
    who: Principal,
) -> VersionInfo:
    """A checkpoint (default: the best) of one of the caller's succeeded jobs as the next
    version of `name`."""
    job = jobs.get(job_id, scope_of(who))
    if job is None:
        raise NotFound(f"no job {job_id!r}")
    if job.status != "succeeded":
        raise Conflict(f"job {job.id} is {job.status}; only succeeded jobs are registered")
    try:
        row = registry.register(name=name, owner=job.owner, job=job, checkpoint=checkpoint)
    except ArtifactError as error:
        raise InvalidRequest([{"field": "checkpoint", "message": str(error)}]) from error
    except ModelOwnedElsewhereError as error:
        # The same answer as for a model that does not exist: names of other owners' models
        # are not to be learnt by probing.
        raise NotFound(f"no model {name!r}") from error
    except (VersionTakenError, RegisteredElsewhereError) as error:
        raise Conflict(str(error)) from error
    return registry.info(row)


def set_alias(
    registry: Registry, name: str, alias: str, number: int, who: Principal
) -> ModelListing:
    """Point `alias` at a version (moving it is how a rollout happens); the model after."""
    visible(registry, name, who)
    try:
        registry.set_alias(name, alias, number)
    except VersionMissingError as error:
        raise InvalidRequest([{"field": "version", "message": str(error)}]) from error
    return visible(registry, name, who)


def delete_alias(registry: Registry, name: str, alias: str, who: Principal) -> None:
    visible(registry, name, who)
    if not registry.delete_alias(name, alias):
        raise NotFound(f"model {name!r} has no alias {alias!r}")


def delete_version(registry: Registry, name: str, number: int, who: Principal) -> None:
    """Delete a version no alias points to: its record and its artifact folder."""
    visible(registry, name, who)
    try:
        deleted = registry.delete_version(name, number)
    except AliasInUseError as error:
        raise Conflict(str(error)) from error
    if not deleted:
        raise NotFound(f"model {name!r} has no version {number}")
