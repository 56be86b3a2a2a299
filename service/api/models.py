"""/v1/models: registered versions (immutable), aliases (mutable pointers)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from service.api.deps import Reader, ServicesDep, Submitter
from service.errors import Conflict, InvalidRequest, NotFound
from service.registry import ALIAS_PATTERN, ArtifactError, ModelNotFound, Registry, VersionInfo
from service.store import Principal
from service.store.models import (
    AliasInUseError,
    ModelListing,
    ModelOwnedElsewhereError,
    VersionMissingError,
    VersionTakenError,
)

router = APIRouter(prefix="/v1/models", tags=["models"])
Name = Annotated[str, Path(pattern=r"^[a-z0-9][a-z0-9._-]{0,62}$")]
Alias = Annotated[str, Path(pattern=ALIAS_PATTERN)]


class ModelOut(BaseModel):
    name: str
    owner: str
    versions: list[VersionInfo]
    aliases: dict[str, int]


class RegisterRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_id: str = Field(..., max_length=40)
    checkpoint: str | None = Field(
        None,
        max_length=1000,
        description="inside the job's run folder: relative (train/checkpoint_000002) or "
        "as reported; default the job's best checkpoint",
    )


class AliasRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(..., ge=1)


def visible(services: ServicesDep, name: str, who: Principal) -> ModelListing:
    """The model with its versions and aliases, if the caller may see it; else 404."""
    found = services.registry.listings(name=name)
    if not found or (found[0].model.owner != who.owner and not who.is_admin):
        raise NotFound(f"no model {name!r}")
    return found[0]


def out(registry: Registry, listing: ModelListing) -> ModelOut:
    return ModelOut(
        name=listing.model.name,
        owner=listing.model.owner,
        versions=[registry.info(v, listing.aliases) for v in listing.versions],
        aliases=listing.aliases,
    )


@router.get("", response_model=list[ModelOut])
def list_models(services: ServicesDep, who: Reader) -> list[ModelOut]:
    owner = None if who.is_admin else who.owner
    registry = services.registry
    return [out(registry, listing) for listing in registry.listings(owner)]


@router.get("/{name}", response_model=ModelOut)
def get_model(name: Name, services: ServicesDep, who: Reader) -> ModelOut:
    return out(services.registry, visible(services, name, who))


@router.get("/{name}/versions/{version}", response_model=VersionInfo)
def get_version(name: Name, version: int, services: ServicesDep, who: Reader) -> VersionInfo:
    visible(services, name, who)
    try:
        return services.registry.resolve(f"{name}:{version}")
    except ModelNotFound as error:
        raise NotFound(str(error)) from error


@router.post("/{name}/versions", status_code=201, response_model=VersionInfo)
def register_version(
    name: Name, body: RegisterRequest, services: ServicesDep, who: Submitter
) -> VersionInfo:
    """Register a checkpoint of one of your succeeded jobs as the next version."""
    job = services.jobs.get(body.job_id, None if who.is_admin else who.owner)
    if job is None:
        raise NotFound(f"no job {body.job_id!r}")
    if job.status != "succeeded":
        raise Conflict(f"job {job.id} is {job.status}; only succeeded jobs are registered")
    try:
        row = services.registry.register(
            name=name, owner=job.owner, job=job, checkpoint=body.checkpoint
        )
    except ArtifactError as error:
        raise InvalidRequest([{"field": "checkpoint", "message": str(error)}]) from error
    except ModelOwnedElsewhereError as error:
        # The same answer as for a model that does not exist: names of other owners' models
        # are not to be learnt by probing.
        raise NotFound(f"no model {name!r}") from error
    except VersionTakenError as error:
        raise Conflict(str(error)) from error
    return services.registry.info(row)


@router.put("/{name}/aliases/{alias}", response_model=ModelOut)
def set_alias(
    name: Name, alias: Alias, body: AliasRequest, services: ServicesDep, who: Submitter
) -> ModelOut:
    """Point `alias` (e.g. production) at a version; moving it is how a rollout happens."""
    visible(services, name, who)
    try:
        services.registry.set_alias(name, alias, body.version)
    except VersionMissingError as error:
        raise InvalidRequest([{"field": "version", "message": str(error)}]) from error
    return out(services.registry, visible(services, name, who))


@router.delete("/{name}/aliases/{alias}", status_code=204)
def delete_alias(name: Name, alias: Alias, services: ServicesDep, who: Submitter) -> Response:
    visible(services, name, who)
    if not services.registry.delete_alias(name, alias):
        raise NotFound(f"model {name!r} has no alias {alias!r}")
    return Response(status_code=204)


@router.delete("/{name}/versions/{version}", status_code=204)
def delete_version(name: Name, version: int, services: ServicesDep, who: Submitter) -> Response:
    """Delete a version no alias points to: its record and its artifact folder."""
    visible(services, name, who)
    try:
        deleted = services.registry.delete_version(name, version)
    except AliasInUseError as error:
        raise Conflict(str(error)) from error
    if not deleted:
        raise NotFound(f"model {name!r} has no version {version}")
    return Response(status_code=204)
