"""Model registry: versions, aliases and their checksummed artifact folders (/v1/models).

`routes.py` → `use_cases.py` (list, read, register, move an alias) → `registry.py` (the version
lifecycle over the SQL store), `record.py` (the typed record every reader gets: spec,
calibration and lineage parsed once) and `files.py` (what happens on the storage root:
confinement of a checkpoint to its job's run folder, hashed copy, publishing); `registrar.py`
registers a succeeded job's checkpoint off the reconciler's thread; `mlflow_mirror.py` mirrors
into MLflow.
"""

from service.registry.files import ArtifactError, RegistryFiles
from service.registry.record import Lineage, ModelVersion
from service.registry.registry import (
    ALIAS_PATTERN,
    InvalidAliasError,
    ModelNotFound,
    RegisteredElsewhereError,
    Registry,
    VersionInfo,
    dataset_identity,
)

__all__ = [
    "ALIAS_PATTERN",
    "ArtifactError",
    "InvalidAliasError",
    "Lineage",
    "ModelNotFound",
    "ModelVersion",
    "RegisteredElsewhereError",
    "Registry",
    "RegistryFiles",
    "VersionInfo",
    "dataset_identity",
]
