"""Queries on the model registry: names, immutable versions, mutable aliases."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError

from service.store.db import Database
from service.store.jobs import now
from service.store.schema import AliasRow, ModelRow, ModelVersionRow


class ModelOwnedElsewhereError(Exception):
    """The model name belongs to another owner."""


class AliasInUseError(Exception):
    """A version that an alias points to cannot be deleted."""


class ModelStore:
    def __init__(self, db: Database):
        self.db = db

    def add_version(self, name: str, owner: str, **fields: Any) -> ModelVersionRow:
        """The next version of `name` (created for `owner` if new). Retries on the race of
        two registrations taking the same number."""
        for _ in range(5):
            with self.db.session() as s:
                model = s.get(ModelRow, name)
                if model is None:
                    s.add(ModelRow(name=name, owner=owner, created_at=now()))
                elif model.owner != owner:
                    raise ModelOwnedElsewhereError(f"model {name!r} belongs to another owner")
            try:
                with self.db.session() as s:
                    last = s.scalar(
                        select(func.max(ModelVersionRow.version)).where(
                            ModelVersionRow.name == name
                        )
                    )
                    row = ModelVersionRow(
                        name=name, version=(last or 0) + 1, created_at=now(), **fields
                    )
                    s.add(row)
                return row
            except IntegrityError:
                continue
        raise RuntimeError(f"could not allocate a version of {name!r}")

    def model(self, name: str) -> ModelRow | None:
        with self.db.session() as s:
            return s.get(ModelRow, name)

    def models(self, owner: str | None) -> list[ModelRow]:
        query = select(ModelRow).order_by(ModelRow.name)
        if owner is not None:
            query = query.where(ModelRow.owner == owner)
        with self.db.session() as s:
            return list(s.scalars(query))

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
        with self.db.session() as s:
            return s.get(ModelVersionRow, (name, version))

    def version_of_job(self, job_id: str, source: str) -> ModelVersionRow | None:
        with self.db.session() as s:
            return s.scalars(
                select(ModelVersionRow).where(
                    ModelVersionRow.job_id == job_id, ModelVersionRow.source == source
                )
            ).first()

    def aliases(self, name: str) -> dict[str, int]:
        with self.db.session() as s:
            rows = s.scalars(select(AliasRow).where(AliasRow.name == name)).all()
        return {r.alias: r.version for r in rows}

    def set_alias(self, name: str, alias: str, version: int) -> None:
        with self.db.session() as s:
            row = s.get(AliasRow, (name, alias))
            if row is None:
                s.add(AliasRow(name=name, alias=alias, version=version, updated_at=now()))
            else:
                row.version, row.updated_at = version, now()

    def delete_alias(self, name: str, alias: str) -> bool:
        with self.db.session() as s:
            done = s.execute(delete(AliasRow).where(AliasRow.name == name, AliasRow.alias == alias))
        return bool(done.rowcount)  # type: ignore[attr-defined]

    def delete_version(self, name: str, version: int) -> bool:
        with self.db.session() as s:
            pointing = s.scalars(
                select(AliasRow.alias).where(AliasRow.name == name, AliasRow.version == version)
            ).all()
            if pointing:
                raise AliasInUseError(
                    f"{name}:{version} is what {', '.join(sorted(pointing))} points to; "
                    "move or delete the alias first"
                )
            done = s.execute(
                delete(ModelVersionRow).where(
                    ModelVersionRow.name == name, ModelVersionRow.version == version
                )
            )
        return bool(done.rowcount)  # type: ignore[attr-defined]
