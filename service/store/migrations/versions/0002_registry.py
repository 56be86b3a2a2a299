"""Model registry: models, immutable versions with artifact checksums, aliases.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "models",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("owner", sa.String(63), nullable=False, index=True),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "model_versions",
        sa.Column(
            "name",
            sa.String(63),
            sa.ForeignKey("models.name", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("job_id", sa.String(40), nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("artifact", sa.Text, nullable=False),
        sa.Column("files", sa.JSON, nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("dataset", sa.JSON, nullable=False),
        sa.Column("metrics", sa.JSON, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "model_aliases",
        sa.Column(
            "name",
            sa.String(63),
            sa.ForeignKey("models.name", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("alias", sa.String(63), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
    )


def downgrade() -> None:
    for table in ("model_aliases", "model_versions", "models"):
        op.drop_table(table)
