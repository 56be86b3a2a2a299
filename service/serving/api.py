"""The serving app's parts that need no Ray: its settings, how batched work is grouped, and
the bodies of `/v1/predict` (the OpenAI-compatible bodies: openai_api.py).

Requests forbid unknown fields: an option numtune does not implement is a 422 naming it,
never silently ignored.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from jobs.infer import Decoding, NumericPredictor
from jobs.modeling.vision import ImageError, read_image
from service.errors import InvalidRequest
from service.serving.calibration import Estimate, ServedCalibration, ServedPrediction

MAX_PROMPTS = 64  # prompts in one request: one request must not hold a replica for long
MAX_NEW_TOKENS = 512  # the tiny models' max_position_embeddings; larger models allow more
MAX_SEED = 2**63 - 1  # torch.manual_seed takes a signed 64-bit integer; past it, it raises


class ServeConfig(BaseSettings):
    """Serving knobs, NUMTUNE_SERVE_* (the port is Settings.serve_port, NUMTUNE_SERVE_PORT)."""

    model_config = SettingsConfigDict(env_prefix="NUMTUNE_SERVE_", extra="ignore")

    # Loopback in the embedded default; a container on a private network sets 0.0.0.0.
    host: str = "127.0.0.1"
    min_replicas: int = Field(1, ge=1)
    max_replicas: int = Field(1, ge=1)  # above min_replicas: autoscaling on
    target_ongoing_requests: float = Field(8.0, gt=0)
    max_ongoing_requests: int = Field(64, ge=1)
    replica_cpus: float = Field(1.0, gt=0)
    batching: bool = True
    max_batch_size: int = Field(16, ge=1)
    batch_wait_s: float = Field(0.01, ge=0)
    max_models_per_replica: int = Field(3, ge=1)
    # The dtype a replica serves models in: auto is bfloat16 where the hardware computes it
    # natively (jobs/modeling/precision.py), float32 elsewhere.
    dtype: Literal["auto", "fp32", "bf16"] = "auto"
    # What decodes (docs/concepts/serving.md): "vllm" runs text models' answers, samples and
    # completions on vLLM (a worker per loaded model, from `.venv-vllm`, which `make setup`
    # builds); transformers' generate() serves the rest, and every model where vLLM cannot
    # start. "hf": generate() alone. vllm_python: that environment's Python (empty: the
    # checkout's .venv-vllm); vllm_kv_cache_gib: RAM each worker keeps for its KV cache.
    engine: Literal["hf", "vllm"] = "hf"
    vllm_python: str = ""
    vllm_kv_cache_gib: int = Field(1, ge=1)
    # LoRA adapter versions up to this rank decode on their base's vLLM worker (vLLM takes
    # these ranks); higher ones on generate().
    vllm_max_lora_rank: Literal[8, 16, 32, 64, 128, 256, 320, 512] = 64
    # What one request may cost (service/serving/limits.py): its body, each prompt's
    # tokens, its token budget (rows generated × (longest prompt + new tokens)) and the
    # seconds its generation may run before it is cut off and answered 504.
    max_body_bytes: int = Field(256_000, ge=1024)
    max_prompt_tokens: int = Field(256, ge=1)
    max_request_tokens: int = Field(16_384, ge=1)
    request_timeout_s: float = Field(60.0, gt=0)
    # /v1/calibrate (service/serving/calibrate_run.py): it runs in slices of at most
    # max_request_tokens each; the whole run's token positions and seconds are bounded too.
    max_calibrate_tokens: int = Field(262_144, ge=1)
    calibrate_timeout_s: float = Field(600.0, gt=0)


class ReplicaConfig(BaseModel):
    """What a replica needs, in plain fields (it is pickled to the replica's process)."""

    database_url: str
    storage_root: str
    cache_dir: str
    token_cache_s: float
    serve: ServeConfig


@dataclass
class Work:
    """One request's share of a batch: its prompts and the call's keyword arguments."""

    kind: Literal["predict", "complete"]
    ref: str  # immutable "name:version": the multiplexed model id
    prompts: list[str]
    options: dict[str, Any]
    owner: str  # whose turn the call takes: owners take turns at the replica's compute
    images: list[bytes | None] | None = None  # per prompt, checked encoded images
    cost: int = 0  # token positions it generates (limits.check_budget): merged calls stay small

    def group(self) -> tuple[Any, ...]:
        key = (self.kind, self.ref, self.owner, tuple(sorted(self.options.items())))
        # A seeded request is reproducible only alone: merged prompts would share its RNG.
        # A request with images runs alone too: its images go with its own prompts.
        alone = self.options.get("seed") is not None or self.images is not None
        return (*key, id(self)) if alone else key

    def call(self, predictor: NumericPredictor, prompts: list[str]) -> list[Any]:
        # Works with images are never merged (group), so `prompts` are this work's own.
        if self.kind == "predict":
            return list(predictor.predict(prompts, images=self.images, **self.options))
        return list(predictor.complete(prompts, images=self.images, **self.options))


# A data URL of an image: "data:image/png;base64,<payload>" (any image/* subtype).
DATA_URL = re.compile(r"^data:image/[a-z0-9.+-]+;base64,", re.IGNORECASE)
# (file id, field) -> the bytes of an image the caller uploaded (service/serving/uploaded.py),
# or a 422 naming the field. "file-" cannot start base64 ("-" is not in its alphabet).
ImageReader = Callable[[str, str], bytes]


def decode_image(value: str, field: str, uploaded: ImageReader | None = None) -> bytes:
    """A request's image (a data URL, bare base64, or an uploaded image's file id), checked
    as every image is (jobs/modeling/vision.py: bytes, format, pixels); a 422 naming `field`
    otherwise."""
    payload = DATA_URL.sub("", value, count=1)
    if payload.startswith("data:"):
        message = "a data URL must be data:image/<type>;base64,<payload>"
        raise InvalidRequest([{"field": field, "message": message}])
    try:
        if uploaded is not None and value.startswith("file-"):
            data = uploaded(value, field)
        else:
            data = base64.b64decode(payload, validate=True)
        read_image(data)
    except (binascii.Error, ValueError) as error:  # ImageError is a ValueError
        message = str(error) if isinstance(error, ImageError) else "not valid base64"
        raise InvalidRequest([{"field": field, "message": message}]) from None
    return data


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PredictRequest(Strict):
    model: str = Field(min_length=1, max_length=140, description='"name@alias" or "name:3"')
    prompts: list[str] = Field(min_length=1, max_length=MAX_PROMPTS)
    images: list[str | None] | None = Field(
        None,
        max_length=MAX_PROMPTS,
        description="per prompt: its image as base64, a data URL or the id of an image"
        " uploaded with purpose vision (file-…), or null (vision models)",
    )
    max_new_tokens: int = Field(16, ge=1, le=MAX_NEW_TOKENS)
    decoding: Decoding = "greedy"
    samples: int = Field(16, ge=0, le=256, description="K sampled completions (0: no stats)")
    interval_mass: float = Field(0.9, gt=0.0, lt=1.0)
    temperature: float = Field(1.0, gt=0.0, le=10.0, description="of the K samples")
    seed: int | None = Field(None, ge=0, le=MAX_SEED)
    # Which number `estimate` holds (service/serving/calibration.py); none: the text's.
    estimate: Estimate | None = None

    def decoded_images(self, uploaded: ImageReader | None = None) -> list[bytes | None] | None:
        """The checked images, one per prompt (or None when the request has none); file ids
        are read through `uploaded` (blocking: SQL and storage)."""
        if self.images is None:
            return None
        if len(self.images) != len(self.prompts):
            message = f"give one image (or null) per prompt: {len(self.prompts)}"
            raise InvalidRequest([{"field": "images", "message": message}])
        return [
            None if image is None else decode_image(image, f"images[{i}]", uploaded)
            for i, image in enumerate(self.images)
        ]

    @property
    def rows_per_prompt(self) -> int:
        """Generated rows per prompt: the greedy answer and the K samples."""
        return 1 + self.samples


class PredictResponse(BaseModel):
    model: str  # the reference as asked ("arith@production")
    version: int  # the version it resolved to
    ref: str  # that version's immutable reference ("arith:3")
    predictions: list[ServedPrediction]
    calibration: ServedCalibration  # whether the intervals carry the version's calibration
    samples_used_for: str  # what the request's K samples per prompt were spent on


def samples_used_for(samples: int, decoding: str) -> str:
    """The response's account of K: the text's number never needs samples."""
    text = "text and value come from one greedy pass"
    if decoding != "greedy":
        text += (
            f" with decoding {decoding!r}, which reads the model's distribution over number"
            " tokens at each step and draws no samples"
        )
    if samples == 0:
        return f"none drawn (samples=0): {text}; expected_value, median, std and interval are null"
    return (
        f"{samples} sampled completions per prompt, decoded from one shared run of the prompt,"
        f" give expected_value, median, std and interval only; {text}"
    )
