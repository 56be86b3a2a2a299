"""Uploaded files (/v1/files), and the OpenAI-style create's own fields on a job.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.create_table(
        "files",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("owner", sa.String(63), nullable=False),
        sa.Column("filename", sa.String(255), nullable=False),
        sa.Column("purpose", sa.String(32), nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("rows", sa.Integer, nullable=False),
        sa.Column("location", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_files_owner_created", "files", ["owner", "created_at"])
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("meta", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("meta")
    op.drop_index("ix_files_owner_created", table_name="files")
    op.drop_table("files")
