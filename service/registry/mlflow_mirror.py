"""numtune's registry mirrored into MLflow's Model Registry (only with NUMTUNE_MLFLOW_URI).

Each numtune version becomes a version of the MLflow registered model of the same name,
its source the version's folder in numtune's storage, its run the job's tracked run (found
by the job-id tag), tagged with numtune's version number: MLflow numbers its versions
itself, and numtune's may have gaps (a deleted v2 stays unused), so aliases are moved by
that tag, not by number.

numtune's registry is the record and MLflow a view of it: a failure to reach MLflow is
logged as a warning and never fails a registration or an alias move. A version missed that
way is mirrored when an alias is next set on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from jobs.storage.uri import join_uri
from jobs.tracking.job import JOB_TAG, mlflow_client, tracking_errors
from service.store.schema import ModelVersionRow

log = logging.getLogger(__name__)

VERSION_TAG = "numtune.version"


class MlflowMirror:
    def __init__(self, uri: str, storage_uri: str):
        self.uri, self.storage_uri = uri, storage_uri
        self._client: Any = None

    def _safely(self, what: str, call: Callable[[Any], object]) -> bool:
        """`call(client)`; False, after a warning, when MLflow failed (see the docstring)."""
        try:
            if self._client is None:
                self._client = mlflow_client(self.uri)
            call(self._client)
        except tracking_errors() as error:
            log.warning("MLflow registry mirror at %s: %s failed: %s", self.uri, what, error)
            return False
        return True

    def registered(self, row: ModelVersionRow, owner: str) -> bool:
        """Mirror a new numtune version; False when MLflow failed (numtune's stands)."""
        return self._safely(
            f"mirroring {row.name}:{row.version}", lambda c: self._ensure(c, row, owner)
        )

    def alias_set(self, row: ModelVersionRow, alias: str, owner: str) -> bool:
        def move(client: Any) -> None:
            mirrored = self._ensure(client, row, owner)
            client.set_registered_model_alias(row.name, alias, mirrored)

        return self._safely(f"alias {row.name}@{alias}", move)

    def alias_deleted(self, name: str, alias: str) -> bool:
        return self._safely(
            f"deleting {name}@{alias}", lambda c: c.delete_registered_model_alias(name, alias)
        )

    def version_deleted(self, name: str, version: int) -> bool:
        def forget(client: Any) -> None:
            mirrored = _mirrored(client, name, version)
            if mirrored is not None:
                client.delete_model_version(name, mirrored)

        return self._safely(f"deleting {name}:{version}", forget)

    def _ensure(self, client: Any, row: ModelVersionRow, owner: str) -> str:
        """MLflow's version for `row`, created (with its registered model) when missing."""
        mirrored = _mirrored(client, row.name, row.version)
        if mirrored is not None:
            return mirrored
        if not client.search_registered_models(f"name = '{row.name}'"):
            client.create_registered_model(row.name, tags={"numtune.owner": owner})
        created = client.create_model_version(
            row.name,
            source=join_uri(self.storage_uri, row.artifact or ""),
            run_id=_job_run(client, row.job_id),
            tags={VERSION_TAG: str(row.version), JOB_TAG: row.job_id},
            description=f"numtune {row.name}:{row.version} from job {row.job_id}",
        )
        log.info("mirrored %s:%s as MLflow version %s", row.name, row.version, created.version)
        return str(created.version)


def _mirrored(client: Any, name: str, version: int) -> str | None:
    """MLflow's version number for numtune's `version` of `name`, if mirrored."""
    for found in client.search_model_versions(f"name = '{name}'"):
        if found.tags.get(VERSION_TAG) == str(version):
            return str(found.version)
    return None


def _job_run(client: Any, job_id: str) -> str | None:
    """The id of the job's tracked run, to link the version to it (None if untracked)."""
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(
        experiments, filter_string=f"tags.`{JOB_TAG}` = '{job_id}'", max_results=1
    )
    return runs[0].info.run_id if runs else None
