"""Jobs (and tunes), their metrics and logs, and API tokens.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("owner", sa.String(63), nullable=False, index=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("scopes", sa.String(64), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("revoked_at", TZ),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("owner", sa.String(63), nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("spec_sha256", sa.String(64), nullable=False),
        sa.Column("idempotency_key", sa.String(200)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(32)),
        sa.Column("detail", sa.Text),
        sa.Column("ray_status", sa.String(16)),
        sa.Column("ray_message", sa.Text),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column("started_at", TZ),
        sa.Column("finished_at", TZ),
        sa.Column("unreachable_since", TZ),
        sa.Column("best_checkpoint", sa.Text),
        sa.Column("result", sa.JSON),
        sa.Column("trials", sa.JSON),
        sa.Column("metrics_count", sa.Integer, nullable=False),
        sa.Column("log_chars", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("owner", "idempotency_key", name="uq_jobs_owner_idempotency"),
    )
    op.create_index("ix_jobs_owner_kind_created", "jobs", ["owner", "kind", "created_at"])
    op.create_index("ix_jobs_status", "jobs", ["status"])
    for table, column, kind in (
        ("job_metrics", "data", sa.JSON),
        ("job_logs", "text", sa.Text),
    ):
        op.create_table(
            table,
            sa.Column(
                "job_id",
                sa.String(40),
                sa.ForeignKey("jobs.id", ondelete="CASCADE"),
                primary_key=True,
            ),
            sa.Column("seq", sa.Integer, primary_key=True),
            *([sa.Column("step", sa.Integer)] if table == "job_metrics" else []),
            sa.Column(column, kind, nullable=False),
        )


def downgrade() -> None:
    for table in ("job_logs", "job_metrics", "jobs", "tokens"):
        op.drop_table(table)
