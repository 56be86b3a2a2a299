"""Model registry: versions, aliases and their checksummed artifact folders.

`registry.py` is the version lifecycle over the SQL store; `record.py` the typed record every
reader gets (spec, calibration, lineage parsed once); `files.py` is what happens on the
storage root (confinement of a checkpoint to its job's run folder, hashed copy, publishing).
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
