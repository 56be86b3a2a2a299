"""Compute usage across pauses: the running seconds of a job's earlier runs (before each
resume) and when it last stopped running for a pause, so that a paused job's time in the
pause never counts as use and its time before it is not forgotten when it resumes.

Revision ID: 0008_usage_segments
Revises: 0007_pause
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_usage_segments"
down_revision = "0007_pause"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("ran_seconds", sa.Float, nullable=False, server_default="0"))
        batch.add_column(sa.Column("ran_until", sa.DateTime(timezone=True)))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for column in ("ran_until", "ran_seconds"):
            batch.drop_column(column)
