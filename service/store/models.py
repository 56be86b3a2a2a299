"""Queries on the model registry: names, immutable versions, mutable aliases."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from service.store.db import Database
from service.store.job_rows import now
from service.store.schema import AliasRow, ModelRow, ModelVersionRow

# Version numbers are SQLite/Postgres BIGINTs: a larger number in a URL, a form or a model
# reference names no version (404/422), and must not reach the driver (OverflowError, 500).
MAX_VERSION = 2**63 - 1


def storable(version: int) -> bool:
    """Whether `version` can be a stored version number at all."""
    return 1 <= version <= MAX_VERSION


class ModelOwnedElsewhereError(Exception):
    """The model name belongs to another owner."""


class AliasInUseError(Exception):
    """A version that an alias points to cannot be deleted."""


class VersionTakenError(Exception):
    """This job's checkpoint is already a version (registered concurrently)."""


class VersionMissingError(Exception):
    """An alias cannot point at a version that does not exist (or was just deleted)."""


@dataclass(frozen=True)
class ModelListing:
    """A model with its versions (oldest first) and its aliases (alias -> version)."""

    model: ModelRow
    versions: list[ModelVersionRow]
    aliases: dict[str, int]


class ModelStore:
    def __init__(self, db: Database):
        self.db = db

    def reserve_version(self, name: str, owner: str) -> int:
        """A version number of `name` (the model created for `owner` if new) that no one
        else gets, ever: numbers of deleted versions are not handed out again."""
        for _ in range(5):
            try:
                with self.db.session() as s:
                    model = s.get(ModelRow, name)
                    if model is None:
                        s.add(ModelRow(name=name, owner=owner, created_at=now(), next_version=2))
                        return 1  # committed on leaving the block, or IntegrityError
                    if model.owner != owner:
                        raise ModelOwnedElsewhereError(f"model {name!r} belongs to another owner")
                    number = model.next_version
                    taken = s.execute(
                        update(ModelRow)
                        .where(ModelRow.name == name, ModelRow.next_version == number)
                        .values(next_version=number + 1)
                    )
                    if taken.rowcount:  # type: ignore[attr-defined]
                        return number
            except IntegrityError:
                continue  # another first registration created the model: take a number of it
        raise RuntimeError(f"could not allocate a version of {name!r}")

    def add_version(self, name: str, version: int, **fields: Any) -> ModelVersionRow:
        """Record a version whose files are complete; VersionTakenError when the same job's
        checkpoint became a version meanwhile."""
        row = ModelVersionRow(name=name, version=version, created_at=now(), **fields)
        try:
            with self.db.session() as s:
                s.add(row)
        except IntegrityError as error:
            raise VersionTakenError(f"{fields.get('job_id')} is registered already") from error
        return row

    def model(self, name: str) -> ModelRow | None:
        with self.db.session() as s:
            return s.get(ModelRow, name)

    def listings(self, owner: str | None = None, name: str | None = None) -> list[ModelListing]:
        """The models of `owner` (all when None), or only `name`, by name, with their
        versions and aliases: three queries however many models there are."""
        chosen = select(ModelRow.name)
        if owner is not None:
            chosen = chosen.where(ModelRow.owner == owner)
        if name is not None:
            chosen = chosen.where(ModelRow.name == name)
        versions: defaultdict[str, list[ModelVersionRow]] = defaultdict(list)
        aliases: defaultdict[str, dict[str, int]] = defaultdict(dict)
        with self.db.session() as s:
            models = s.scalars(
                select(ModelRow).where(ModelRow.name.in_(chosen)).order_by(ModelRow.name)
            ).all()
            for version in s.scalars(
                select(ModelVersionRow)
                .where(ModelVersionRow.name.in_(chosen))
                .order_by(ModelVersionRow.version)
            ):
                versions[version.name].append(version)
            for alias in s.scalars(select(AliasRow).where(AliasRow.name.in_(chosen))):
                aliases[alias.name][alias.alias] = alias.version
        return [ModelListing(m, versions[m.name], aliases[m.name]) for m in models]

    def versions(self, name: str) -> list[ModelVersionRow]:
        with self.db.session() as s:
            return list(
                s.scalars(
                    select(ModelVersionRow)
                    .where(ModelVersionRow.name == name)
                    .order_by(ModelVersionRow.version)
                )
            )

    def version(self, name: str, version: int) -> ModelVersionRow | None:
        if not storable(version):
            return None
        with self.db.session() as s:
            return s.get(ModelVersionRow, (name, version))

    def set_calibration(self, name: str, version: int, record: dict[str, Any]) -> bool:
        """Store (replace) a version's calibration in its own column: a measurement of the
        version, not part of its files or lineage. False: no such version."""
        if not storable(version):
            return False
        with self.db.session() as s:
            row = s.get(ModelVersionRow, (name, version), with_for_update=True)
            if row is None:
                return False
            row.calibration = record
            return True

    def version_of_job(self, job_id: str, source: str) -> ModelVersionRow | None:
        with self.db.session() as s:
            return s.scalars(
                select(ModelVersionRow).where(
                    ModelVersionRow.job_id == job_id, ModelVersionRow.source == source
                )
            ).first()

    def of_jobs(self, job_ids: Sequence[str]) -> list[ModelVersionRow]:
        """The versions registered from these jobs, oldest first."""
        with self.db.session() as s:
            return list(
                s.scalars(
                    select(ModelVersionRow)
                    .where(ModelVersionRow.job_id.in_(job_ids))
                    .order_by(ModelVersionRow.created_at, ModelVersionRow.version)
                )
            )

    def aliases(self, name: str) -> dict[str, int]:
        with self.db.session() as s:
            rows = s.scalars(select(AliasRow).where(AliasRow.name == name)).all()
        return {r.alias: r.version for r in rows}

    def set_alias(self, name: str, alias: str, version: int) -> None:
        """Point the alias at an existing version: checked by the database's foreign key in
        the same transaction, so a version deleted meanwhile is refused, not pointed at."""
        if not storable(version):
            raise VersionMissingError(f"{name} has no version {version}")
        try:
            with self.db.session() as s:
                row = s.get(AliasRow, (name, alias))
                if row is None:
                    s.add(AliasRow(name=name, alias=alias, version=version, updated_at=now()))
                else:
                    row.version, row.updated_at = version, now()
        except IntegrityError as error:
            raise VersionMissingError(f"{name} has no version {version}") from error

    def delete_alias(self, name: str, alias: str) -> bool:
        with self.db.session() as s:
            done = s.execute(delete(AliasRow).where(AliasRow.name == name, AliasRow.alias == alias))
        return bool(done.rowcount)  # type: ignore[attr-defined]

    def delete_version(self, name: str, version: int) -> bool:
        if not storable(version):
            return False

        def in_use(aliases: Sequence[str]) -> AliasInUseError:
            return AliasInUseError(
                f"{name}:{version} is what {', '.join(sorted(aliases))} points to; "
                "move or delete the alias first"
            )

        try:
            with self.db.session() as s:
                pointing = s.scalars(
                    select(AliasRow.alias).where(AliasRow.name == name, AliasRow.version == version)
                ).all()
                if pointing:
                    raise in_use(pointing)
                done = s.execute(
                    delete(ModelVersionRow).where(
                        ModelVersionRow.name == name, ModelVersionRow.version == version
                    )
                )
        except IntegrityError as error:  # an alias moved onto it meanwhile (foreign key)
            raise in_use([a for a, v in self.aliases(name).items() if v == version]) from error
        return bool(done.rowcount)  # type: ignore[attr-defined]
