"""Back to the queue and registration as a durable step: how often a job's workers failed
to start before its first step (and when it last went back); a succeeded job's pending
registration (the outbox), its attempts, next try, last error and the model it became.

Revision ID: 0005_queue
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_queue"
down_revision = "0004"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("start_retries", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("requeued_at", sa.DateTime(timezone=True)))
        batch.add_column(sa.Column("registration_state", sa.String(16)))
        batch.add_column(
            sa.Column("registration_attempts", sa.Integer, nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("registration_next_at", sa.DateTime(timezone=True)))
        batch.add_column(sa.Column("registration_error", sa.Text))
        batch.add_column(sa.Column("registered_model", sa.String(130)))
        batch.create_index("ix_jobs_registration", ["registration_state"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_registration")
        for column in (
            "registered_model",
            "registration_error",
            "registration_next_at",
            "registration_attempts",
            "registration_state",
            "requeued_at",
            "start_retries",
        ):
            batch.drop_column(column)
