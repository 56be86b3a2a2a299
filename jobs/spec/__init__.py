"""The one contract: REST body, Tune search space and the `spec.json` in every checkpoint.

Everything here is pydantic v2 with extra fields forbidden and NaN/inf refused, so a
spec the API accepts is a spec the Ray job can run, and a bad one fails naming the field.
This package imports no torch: the control plane validates with it cheaply. Import from
`jobs.spec`; the modules are `base.py` (the enumerations and the strict base), `loss.py`
(the loss, built from the loss catalogue jobs/losses/catalog.py), `parts.py` (model, data,
schedule, scale), `adapter.py` (a LoRA adapter), `job.py` (JobSpec, spec files), `tune.py`
(sweeps), `study.py` (a study: arms × seeds against ce), `study_sweeps.py` (its tuned
arms and sweeps) and `metrics.py` (the metrics a study may declare primary).
"""

from jobs.spec.adapter import AdapterSpec
from jobs.spec.base import (
    ARITHMETIC_MODULES,
    BUNDLED_MODELS,
    IMAGE_TASKS,
    METRIC_MODES,
    MULTI_DIGIT_PRESETS,
    RANDOM_PRESETS,
    VISION_PRESETS,
    MetricMode,
    MetricName,
    Strict,
)
from jobs.spec.job import (
    TRACKING_SCHEMES,
    CalibrationSpec,
    JobSpec,
    TrackingSpec,
    load_job_spec,
    load_spec_file,
)
from jobs.spec.loss import LOSS_NAMES, LossName, LossSpec
from jobs.spec.parts import (
    FILE_ID,
    REGISTRY_REF,
    DataSpec,
    DeepSpeedSpec,
    ModelSpec,
    PinnedArtifact,
    ScalingSpec,
    TrainSpec,
)
from jobs.spec.study import BASELINE, HIGHER_IS_BETTER, MAX_RUNS, StudySpec, TunedArm
from jobs.spec.tune import TRIAL_DRIVER_CPU, TUNABLE, ASHASpec, SearchDim, TuneSpec, load_tune_spec

__all__ = [
    "ARITHMETIC_MODULES",
    "BASELINE",
    "BUNDLED_MODELS",
    "FILE_ID",
    "HIGHER_IS_BETTER",
    "IMAGE_TASKS",
    "LOSS_NAMES",
    "MAX_RUNS",
    "METRIC_MODES",
    "MULTI_DIGIT_PRESETS",
    "RANDOM_PRESETS",
    "REGISTRY_REF",
    "TRACKING_SCHEMES",
    "TRIAL_DRIVER_CPU",
    "TUNABLE",
    "VISION_PRESETS",
    "ASHASpec",
    "AdapterSpec",
    "CalibrationSpec",
    "DataSpec",
    "DeepSpeedSpec",
    "JobSpec",
    "LossName",
    "LossSpec",
    "MetricMode",
    "MetricName",
    "ModelSpec",
    "PinnedArtifact",
    "ScalingSpec",
    "SearchDim",
    "Strict",
    "StudySpec",
    "TrackingSpec",
    "TrainSpec",
    "TuneSpec",
    "TunedArm",
    "load_job_spec",
    "load_spec_file",
    "load_tune_spec",
]
