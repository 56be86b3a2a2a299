"""The spec a checkpoint folder was trained by (its `spec.json`), for callers that load a
folder by path alone (the CLI, the bench, the calibration hook); the serving replica has it
parsed already in the registry's record and never reads it here."""

from __future__ import annotations

import logging
from pathlib import Path

from pydantic import ValidationError

from jobs.modeling.folders import ModelUnavailableError
from jobs.records.models import SPEC
from jobs.spec import JobSpec

log = logging.getLogger(__name__)


def read_checkpoint_spec(folder: Path) -> JobSpec | None:
    """The folder's spec.json as a JobSpec; None (a plain model folder: arithmetic task, the
    tokenizer's default prompt format) without one; ModelUnavailableError if it is invalid."""
    spec_path = folder / SPEC
    if not spec_path.exists():
        log.info("%s has no %s: arithmetic task, default prompt format", folder, SPEC)
        return None
    try:
        return JobSpec.model_validate_json(spec_path.read_text(encoding="utf-8"))
    except ValidationError as error:
        raise ModelUnavailableError(f"{spec_path} is not a valid job spec: {error}") from error
