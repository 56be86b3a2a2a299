"""Studies (/v1/studies): a spec, the jobs it expanded into, and its result.

Revision ID: 0006_studies
Revises: 0005_queue
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_studies"
down_revision = "0005_queue"


def upgrade() -> None:
    op.create_table(
        "studies",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("owner", sa.String(63), nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("spec_sha256", sa.String(64), nullable=False),
        sa.Column("idempotency_key", sa.String(200)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("detail", sa.Text),
        sa.Column("runs", sa.JSON, nullable=False),
        sa.Column("result", sa.JSON),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("owner", "idempotency_key", name="uq_studies_owner_idempotency"),
    )
    op.create_index("ix_studies_owner_created", "studies", ["owner", "created_at"])
    op.create_index("ix_studies_status", "studies", ["status"])


def downgrade() -> None:
    op.drop_index("ix_studies_status", table_name="studies")
    op.drop_index("ix_studies_owner_created", table_name="studies")
    op.drop_table("studies")
