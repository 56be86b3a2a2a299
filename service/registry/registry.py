"""Model registry: a succeeded job's best checkpoint becomes the next version of a model.

Ray Train's top-k may delete the original checkpoint later, and a version must not change
under its readers, so registering copies the serving files (files.py). Loading for serving
verifies every sha256 again and refuses on any mismatch. An adapter job's checkpoint holds
the adapter alone, so its version does too, with `base.json`: its base's source and sha256
are kept as lineage (`base`, beside the `adapter` of its spec) and checked again at every load
(jobs/modeling/adapters.py).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from jobs.calibration.record import CALIBRATION_FILE, Calibration
from jobs.records.models import BASE, SPEC, BaseReference
from jobs.records.run_files import RunFiles
from jobs.spec import PinnedArtifact
from jobs.storage.artifacts import ArtifactIntegrityError, sha256_file, verified_folder
from jobs.storage.uri import join_uri
from service.registry.files import ArtifactError, RegistryFiles
from service.registry.mlflow_mirror import MlflowMirror
from service.registry.record import Lineage, ModelVersion
from service.store import Database, JobRow
from service.store.models import (
    ModelListing,
    ModelOwnedElsewhereError,
    ModelStore,
    VersionTakenError,
)
from service.store.schema import ModelRow, ModelVersionRow

log = logging.getLogger(__name__)
# An alias name, for the API's path and the dashboard's form alike: it travels in URLs
# (PUT/DELETE /v1/models/{name}/aliases/{alias}) and in `name@alias` references.
ALIAS_PATTERN = r"^[A-Za-z][A-Za-z0-9._-]{0,62}$"


class InvalidAliasError(ValueError):
    """An alias name outside ALIAS_PATTERN."""


REF = re.compile(
    r"^(?P<name>[a-z0-9][a-z0-9._-]{0,62})(?:(?P<sep>[@:])(?P<tag>[A-Za-z0-9._-]{1,63}))?$"
)


class ModelNotFound(Exception):
    """No such model, version or alias (for this caller)."""


class RegisteredElsewhereError(Exception):
    """The checkpoint is a version of another model already: `row` is that version."""

    def __init__(self, row: ModelVersionRow):
        super().__init__(
            f"this checkpoint is registered already as {row.name}:{row.version}; a "
            "checkpoint is one version, of one model (point an alias at it instead)"
        )
        self.row = row


class VersionInfo(BaseModel):
    name: str
    version: int
    ref: str
    job_id: str
    source: str
    task: str
    use_chat_template: bool | None
    files: dict[str, str]
    spec: dict[str, Any]
    dataset: dict[str, Any]
    metrics: dict[str, Any]  # eval metrics; the calibration record is its own field
    aliases: list[str]
    created_at: datetime
    adapter: dict[str, Any] | None = None  # a LoRA adapter version: its spec.model.adapter
    base: dict[str, Any] | None = None  # and its base (jobs/records/models.py BaseReference)
    calibration: Calibration | None = Field(
        None,
        description="interval calibration measured on held-out questions (either stored "
        "layout, read as layout 2); null: not calibrated",
    )


def dataset_identity(spec: dict[str, Any]) -> dict[str, Any]:
    """What data trained it: the generator and its parameters, or the file's sha256."""
    data = dict(spec.get("data") or {})
    if data.get("task") == "jsonl":
        path = data.get("path") or ""
        local = Path(path)
        data["sha256"] = sha256_file(local) if "://" not in path and local.is_file() else None
    return data


def _metrics_of(job: JobRow, files: RunFiles) -> dict[str, Any]:
    """The job's final metrics and the checkpoint's own (its calibration is kept apart)."""
    return {**(job.result or {}).get("metrics", {}), **(files.read_json("metrics.json") or {})}


def _base_lineage(files: RunFiles) -> Lineage:
    """An adapter checkpoint's base reference (`base.json`); no base for a full model."""
    found = files.read_json(BASE)
    if found is None:
        return Lineage()
    try:
        return Lineage(base=BaseReference.model_validate(found))
    except ValueError as error:  # pydantic's ValidationError is one
        raise ArtifactError(f"the checkpoint's {BASE} is not a base reference: {error}") from error


class Registry:
    def __init__(
        self, db: Database, storage_root: str, cache_dir: Path, mlflow_uri: str | None = None
    ):
        self.store = ModelStore(db)
        self.files = RegistryFiles(storage_root)
        self.storage_uri = self.files.uri
        self.cache_dir = cache_dir
        # Versions and aliases mirrored into MLflow's Model Registry; its failures are
        # warnings, never a failed registration (service/registry/mlflow_mirror.py).
        self.mirror = MlflowMirror(mlflow_uri, self.storage_uri) if mlflow_uri else None

    # ---- registration -------------------------------------------------------------------

    def register(
        self, *, name: str, owner: str, job: JobRow, checkpoint: str | None = None
    ) -> ModelVersionRow:
        kept_from = (job.meta or {}).get("kept_from")
        if kept_from:
            raise ArtifactError(
                f"job {job.id} was taken over from {kept_from}, which trained on another "
                "service: its weights stayed there, so it is registered where it ran"
            )
        source = checkpoint or job.best_checkpoint
        if not source:
            raise ArtifactError(f"job {job.id} has no checkpoint to register")
        path = self.files.confined_checkpoint(job.id, source)
        existing = self.store.version_of_job(job.id, path)
        if existing is not None and existing.name != name:
            raise RegisteredElsewhereError(existing)
        if existing is not None:
            return existing  # registering the same checkpoint twice is a no-op
        run_files = RunFiles(self.files.fs, path, path)
        spec = run_files.read_json(SPEC) or job.spec_json
        lineage = _base_lineage(run_files)
        # Unique per attempt: two registrations at once never share a folder.
        staging = f"{self.files.base}/registry/.staging/{job.id}-{uuid.uuid4().hex}"
        final = None
        try:
            hashes = self.files.copy(path, staging)
            number = self.store.reserve_version(name, owner)
            artifact = f"registry/{name}/v{number}"
            final = f"{self.files.base}/{artifact}"
            self.files.publish(staging, final)
            # The row comes last: a version is visible only once its files are complete.
            row = self.store.add_version(
                name,
                number,
                job_id=job.id,
                source=path,
                artifact=artifact,
                files=hashes,
                spec=spec,
                dataset=dataset_identity(spec),
                metrics=_metrics_of(job, run_files),
                calibration=run_files.read_json(CALIBRATION_FILE) or None,
                lineage=lineage.stored(),
            )
        except VersionTakenError:
            self.files.remove(staging, final)
            concurrent = self.store.version_of_job(job.id, path)
            if concurrent is None:  # it was deleted again meanwhile
                raise
            return concurrent
        except (ArtifactError, OSError, ModelOwnedElsewhereError):
            self.files.remove(staging, final)
            raise
        log.info("registered %s:%s from job %s", name, row.version, job.id)
        if self.mirror is not None:
            self.mirror.registered(row, owner)
        return row

    def register_job(self, job: JobRow) -> ModelVersionRow | None:
        """The reconciler's hook: auto-register a succeeded job's (or sweep's) best checkpoint."""
        if job.status != "succeeded" or not job.best_checkpoint:
            return None
        name = job.job_spec.register_as or job.spec.name
        try:
            return self.register(name=name, owner=job.owner, job=job)
        except RegisteredElsewhereError as done:  # registered by hand first: that is the version
            return done.row

    def delete_version(self, name: str, version: int) -> bool:
        """Forget a version no alias points to, and remove its artifact folder."""
        row = self.store.version(name, version)
        if row is None or not self.store.delete_version(name, version):
            return False
        if row.artifact:
            self.files.remove(f"{self.files.base}/{row.artifact}")
        if self.mirror is not None:
            self.mirror.version_deleted(name, version)
        return True

    def set_alias(self, name: str, alias: str, version: int) -> None:
        """Point `alias` at a version; VersionMissingError if there is no such version,
        InvalidAliasError for a name that could not be used in a URL or a reference."""
        if not re.fullmatch(ALIAS_PATTERN, alias):
            raise InvalidAliasError(
                f"{alias[:70]!r}: a letter, then up to 62 letters, digits, '.', '_' or '-'"
            )
        self.store.set_alias(name, alias, version)
        if self.mirror is None:
            return
        model, row = self.store.model(name), self.store.version(name, version)
        if model is not None and row is not None:
            self.mirror.alias_set(row, alias, model.owner)

    def delete_alias(self, name: str, alias: str) -> bool:
        deleted = self.store.delete_alias(name, alias)
        if deleted and self.mirror is not None:
            self.mirror.alias_deleted(name, alias)
        return deleted

    # ---- lookup and loading -------------------------------------------------------------

    def model(self, name: str) -> ModelRow | None:
        return self.store.model(name)

    def listings(self, owner: str | None = None, name: str | None = None) -> list[ModelListing]:
        """Models with their versions and aliases (see ModelStore.listings)."""
        return self.store.listings(owner, name)

    def of_jobs(self, job_ids: list[str]) -> list[ModelVersionRow]:
        """The versions registered from these jobs, oldest first."""
        return self.store.of_jobs(job_ids)

    def info(
        self, version: ModelVersion | ModelVersionRow, aliases: dict[str, int] | None = None
    ) -> VersionInfo:
        """What the API shows of a version; `aliases` of its model, when already read."""
        if isinstance(version, ModelVersionRow):
            version = ModelVersion.of_row(version)
        if aliases is None:
            aliases = self.store.aliases(version.name)
        spec, adapter, base = version.spec, version.adapter, version.base
        return VersionInfo(
            name=version.name,
            version=version.version,
            ref=version.ref,
            job_id=version.job_id,
            source=version.source,
            task=spec.data.task if spec else "arithmetic",
            use_chat_template=spec.model.use_chat_template if spec else None,
            files=version.files,
            spec=version.recorded_spec,
            dataset=version.dataset,
            metrics=version.metrics,
            aliases=sorted(a for a, v in aliases.items() if v == version.version),
            created_at=version.created_at,
            adapter=adapter.model_dump(mode="json") if adapter else None,
            base=base.model_dump(mode="json") if base else None,
            calibration=version.calibration,
        )

    def resolve(self, ref: str, owner: str | None = None) -> ModelVersion:
        """ "name@alias", "name:3" or "name" (the newest version) as its typed record, read
        once; owner None sees all."""
        match = REF.match(ref)
        if match is None:
            raise ModelNotFound(f"{ref!r} is not a model reference (name, name:3 or name@alias)")
        name, sep, tag = match["name"], match["sep"], match["tag"]
        model = self.store.model(name)
        if model is None or (owner is not None and model.owner != owner):
            raise ModelNotFound(f"no model {name!r}")
        if sep == "@":
            number = self.store.aliases(name).get(tag)
            if number is None:
                raise ModelNotFound(f"model {name!r} has no alias {tag!r}")
        elif sep == ":":
            if not tag.isdigit():
                raise ModelNotFound(f"version {tag!r} of {name!r} is not a number")
            number = int(tag)
        else:
            versions = self.store.versions(name)
            if not versions:
                raise ModelNotFound(f"model {name!r} has no versions")
            number = versions[-1].version
        row = self.store.version(name, number)
        if row is None:
            raise ModelNotFound(f"model {name!r} has no version {number}")
        return ModelVersion.of_row(row)

    def pinned(self, version: ModelVersion) -> PinnedArtifact:
        """What a job needs to load exactly this version: its folder's URI and the files'
        sha256 (ModelNotFound for a row without a folder)."""
        if not version.artifact:
            raise ModelNotFound(f"{version.ref} is gone")
        return PinnedArtifact(uri=join_uri(self.storage_uri, version.artifact), files=version.files)

    def pin(self, ref: str, owner: str | None) -> tuple[str, PinnedArtifact]:
        """`ref` as its immutable "name:N" and its pinned artifact; ModelNotFound unless
        `owner` may read it."""
        version = self.resolve(ref, owner)
        return version.ref, self.pinned(version)

    @contextmanager
    def verified_copy(self, version: ModelVersion) -> Iterator[Path]:
        """A private copy of the resolved version's listed files (nothing else), every byte
        hashed as it is copied; ArtifactError on a missing, symlinked or changed file. No
        second lookup: the record says where the files are and what they hash to."""
        pinned = self.pinned(version)
        try:
            with verified_folder(
                pinned.uri, pinned.files, label=version.ref, parent=self.cache_dir
            ) as folder:
                yield folder
        except ArtifactIntegrityError as error:
            raise ArtifactError(str(error)) from error
