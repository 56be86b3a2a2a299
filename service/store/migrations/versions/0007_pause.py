"""Pause and resume: when a pause was asked for, the checkpoint a paused job resumes from,
how many times it resumed (each resume is a fresh Ray submission), and the job's events
(who paused or resumed it, and when).

Revision ID: 0007_pause
Revises: 0006_studies
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_pause"
down_revision = "0006_studies"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("pause_requested_at", sa.DateTime(timezone=True)))
        batch.add_column(sa.Column("paused_checkpoint", sa.Text))
        batch.add_column(sa.Column("resumes", sa.Integer, nullable=False, server_default="0"))
    op.create_table(
        "job_events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "job_id", sa.String(40), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("by", sa.String(63), nullable=False),
        sa.Column("detail", sa.Text),
    )
    op.create_index("ix_job_events_job", "job_events", ["job_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_job_events_job", table_name="job_events")
    op.drop_table("job_events")
    with op.batch_alter_table("jobs") as batch:
        for column in ("resumes", "paused_checkpoint", "pause_requested_at"):
            batch.drop_column(column)
