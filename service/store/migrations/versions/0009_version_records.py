"""A model version's calibration and lineage get columns of their own: until now they were
packed into its `metrics` JSON under "calibration" and "base" and stripped back out on every
read. Existing rows are moved: the keys leave `metrics` and fill the new columns (lineage as
{"base": ...}); downgrade packs them back.

Revision ID: 0009_version_records
Revises: 0008_usage_segments
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0009_version_records"
down_revision = "0008_usage_segments"

# The table as this migration knows it (not the models of today's schema.py).
VERSIONS = sa.table(
    "model_versions",
    sa.column("name", sa.String),
    sa.column("version", sa.Integer),
    sa.column("metrics", sa.JSON),
    sa.column("calibration", sa.JSON),
    sa.column("lineage", sa.JSON),
)


def _rows() -> list[Any]:
    return list(op.get_bind().execute(sa.select(VERSIONS)))


def _update(name: str, version: int, **values: Any) -> None:
    where = sa.and_(VERSIONS.c.name == name, VERSIONS.c.version == version)
    op.get_bind().execute(sa.update(VERSIONS).where(where).values(**values))


def upgrade() -> None:
    with op.batch_alter_table("model_versions") as batch:
        batch.add_column(sa.Column("calibration", sa.JSON, nullable=True))
        batch.add_column(sa.Column("lineage", sa.JSON, nullable=True))
    for row in _rows():
        metrics = dict(row.metrics or {})
        if "calibration" not in metrics and "base" not in metrics:
            continue
        calibration, base = metrics.pop("calibration", None), metrics.pop("base", None)
        lineage = None if base is None else {"base": base}
        _update(row.name, row.version, metrics=metrics, calibration=calibration, lineage=lineage)


def downgrade() -> None:
    for row in _rows():
        packed = {
            **(row.metrics or {}),
            **({"calibration": row.calibration} if row.calibration else {}),
            **({"base": row.lineage["base"]} if (row.lineage or {}).get("base") else {}),
        }
        _update(row.name, row.version, metrics=packed)
    with op.batch_alter_table("model_versions") as batch:
        for column in ("lineage", "calibration"):
            batch.drop_column(column)
