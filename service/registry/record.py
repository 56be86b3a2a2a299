"""A registered version as one typed record: what every reader of the registry uses.

The row (service/store/schema.py ModelVersionRow) keeps JSON as stored; `ModelVersion.of_row`
reads it once: the spec it was trained by parsed as a JobSpec, its interval calibration as a
`Calibration` (either stored layout, read as layout 2) and its lineage (an adapter version's
adapter and base). The serving replica resolves a reference to this record once per cold
load and hands it on, so nothing downstream parses the spec again.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from jobs.calibration.record import Calibration, read_record
from jobs.records.models import BaseReference
from jobs.spec import AdapterSpec, JobSpec
from service.store.schema import ModelVersionRow

log = logging.getLogger(__name__)


class Lineage(BaseModel):
    """Where a version comes from beyond its job: for a LoRA adapter version, its adapter (the
    spec's `model.adapter`) and the base it was trained on (`base.json`, checked at every
    load); both None for a full model."""

    model_config = ConfigDict(frozen=True)

    adapter: AdapterSpec | None = None
    base: BaseReference | None = None

    def stored(self) -> dict[str, Any] | None:
        """The row's `lineage` column: the base alone (the adapter is read from the spec)."""
        return None if self.base is None else {"base": self.base.model_dump(mode="json")}


class ModelVersion(BaseModel):
    """An immutable registered version (its calibration may be measured again later)."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: int
    job_id: str
    source: str  # the checkpoint it was copied from
    artifact: str  # its folder below the storage root
    files: dict[str, str]  # relative path -> sha256
    recorded_spec: dict[str, Any]  # the spec as recorded (what the API shows)
    spec: JobSpec | None  # typed; None where it no longer validates (a version outlives shapes)
    dataset: dict[str, Any]
    metrics: dict[str, Any]  # eval metrics only
    calibration: Calibration | None
    lineage: Lineage
    created_at: datetime

    @property
    def ref(self) -> str:
        """Its immutable reference, "name:N"."""
        return f"{self.name}:{self.version}"

    @property
    def base(self) -> BaseReference | None:
        return self.lineage.base

    @property
    def adapter(self) -> AdapterSpec | None:
        return self.lineage.adapter

    @classmethod
    def of_row(cls, row: ModelVersionRow) -> ModelVersion:
        spec = _spec(row)
        lineage = row.lineage or {}
        return cls(
            name=row.name,
            version=row.version,
            job_id=row.job_id,
            source=row.source,
            artifact=row.artifact,
            files=row.files,
            recorded_spec=row.spec,
            spec=spec,
            dataset=row.dataset,
            metrics=row.metrics,
            calibration=read_record(row.calibration),
            lineage=Lineage(
                adapter=spec.model.adapter if spec else None,
                base=lineage.get("base"),  # validated by pydantic: a BaseReference
            ),
            created_at=row.created_at,
        )


def _spec(row: ModelVersionRow) -> JobSpec | None:
    try:
        return JobSpec.model_validate(row.spec)
    except ValidationError as error:
        log.debug("%s:%s: its recorded spec no longer validates: %s", row.name, row.version, error)
        return None
