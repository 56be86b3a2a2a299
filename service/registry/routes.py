"""/v1/models: registered versions (immutable), aliases (mutable pointers). Wiring only:
the use cases are `service/registry/use_cases.py`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from service.auth.callers import Reader, Submitter
from service.deps import JobsDep, RegistryDep
from service.registry import ALIAS_PATTERN, Registry, VersionInfo
from service.registry import use_cases as ops
from service.store.models import ModelListing

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


def out(registry: Registry, listing: ModelListing) -> ModelOut:
    return ModelOut(
        name=listing.model.name,
        owner=listing.model.owner,
        versions=ops.versions(registry, listing),
        aliases=listing.aliases,
    )


@router.get("", response_model=list[ModelOut])
def list_models(registry: RegistryDep, who: Reader) -> list[ModelOut]:
    return [out(registry, listing) for listing in ops.listings(registry, who)]


@router.get("/{name}", response_model=ModelOut)
def get_model(name: Name, registry: RegistryDep, who: Reader) -> ModelOut:
    return out(registry, ops.visible(registry, name, who))


@router.get("/{name}/versions/{version}", response_model=VersionInfo)
def get_version(name: Name, version: int, registry: RegistryDep, who: Reader) -> VersionInfo:
    return ops.version(registry, name, version, who)


@router.post("/{name}/versions", status_code=201, response_model=VersionInfo)
def register_version(
    name: Name, body: RegisterRequest, registry: RegistryDep, jobs: JobsDep, who: Submitter
) -> VersionInfo:
    """Register a checkpoint of one of your succeeded jobs as the next version."""
    return ops.register(registry, jobs, name, body.job_id, body.checkpoint, who)


@router.put("/{name}/aliases/{alias}", response_model=ModelOut)
def set_alias(
    name: Name, alias: Alias, body: AliasRequest, registry: RegistryDep, who: Submitter
) -> ModelOut:
    """Point `alias` (e.g. production) at a version; moving it is how a rollout happens."""
    return out(registry, ops.set_alias(registry, name, alias, body.version, who))


@router.delete("/{name}/aliases/{alias}", status_code=204)
def delete_alias(name: Name, alias: Alias, registry: RegistryDep, who: Submitter) -> Response:
    ops.delete_alias(registry, name, alias, who)
    return Response(status_code=204)


@router.delete("/{name}/versions/{version}", status_code=204)
def delete_version(name: Name, version: int, registry: RegistryDep, who: Submitter) -> Response:
    """Delete a version no alias points to: its record and its artifact folder."""
    ops.delete_version(registry, name, version, who)
    return Response(status_code=204)
