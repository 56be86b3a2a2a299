"""Queueing and registry integrity: why a queued job waits, how often its submission
failed; one version per (job, checkpoint); version numbers never reused; aliases that
can only point at existing versions.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("queue_position", sa.Integer))
        batch.add_column(sa.Column("waiting_for", sa.Text))
        batch.add_column(sa.Column("submitted_at", sa.DateTime(timezone=True)))
        batch.add_column(
            sa.Column("submit_attempts", sa.Integer, nullable=False, server_default="0")
        )
    with op.batch_alter_table("models") as batch:
        batch.add_column(sa.Column("next_version", sa.Integer, nullable=False, server_default="1"))
    op.execute(
        "UPDATE models SET next_version = 1 + COALESCE("
        "(SELECT MAX(version) FROM model_versions WHERE model_versions.name = models.name), 0)"
    )
    # Registering one job's checkpoint twice at once made two versions; keep the first,
    # and move an alias on a later copy to it.
    op.execute(
        "UPDATE model_aliases SET version = (SELECT MIN(k.version) FROM model_versions AS k, "
        "model_versions AS d WHERE d.name = model_aliases.name "
        "AND d.version = model_aliases.version AND k.name = d.name AND k.job_id = d.job_id "
        "AND k.source = d.source) WHERE EXISTS (SELECT 1 FROM model_versions AS d "
        "WHERE d.name = model_aliases.name AND d.version = model_aliases.version)"
    )
    op.execute(
        "DELETE FROM model_versions WHERE EXISTS (SELECT 1 FROM model_versions AS older "
        "WHERE older.job_id = model_versions.job_id AND older.source = model_versions.source "
        "AND (older.name < model_versions.name OR (older.name = model_versions.name "
        "AND older.version < model_versions.version)))"
    )
    with op.batch_alter_table("model_versions") as batch:
        batch.create_unique_constraint("uq_model_versions_job_source", ["job_id", "source"])
    # An alias left on a deleted version is the bug the foreign key below prevents.
    op.execute(
        "DELETE FROM model_aliases WHERE NOT EXISTS (SELECT 1 FROM model_versions AS v "
        "WHERE v.name = model_aliases.name AND v.version = model_aliases.version)"
    )
    with op.batch_alter_table("model_aliases") as batch:
        batch.create_foreign_key(
            "fk_model_aliases_version",
            "model_versions",
            ["name", "version"],
            ["name", "version"],
        )


def downgrade() -> None:
    with op.batch_alter_table("model_aliases") as batch:
        batch.drop_constraint("fk_model_aliases_version", type_="foreignkey")
    with op.batch_alter_table("model_versions") as batch:
        batch.drop_constraint("uq_model_versions_job_source", type_="unique")
    with op.batch_alter_table("models") as batch:
        batch.drop_column("next_version")
    with op.batch_alter_table("jobs") as batch:
        for column in ("submit_attempts", "submitted_at", "waiting_for", "queue_position"):
            batch.drop_column(column)
