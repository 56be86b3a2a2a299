"""The enumerations the specs draw on (each defined once, here; the loss names in the loss
catalogue, jobs/losses/catalog.py) and their strict base."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

# Eval metrics a job or sweep can optimise (reported as eval_<metric>), and which way is
# better for each: the checkpoint ranking, Tune's mode and the sweep's best trial use it.
MetricName = Literal["exact_match", "mae", "loss", "ce"]
MetricMode = Literal["max", "min"]
METRIC_MODES: dict[MetricName, MetricMode] = {
    "exact_match": "max",
    "mae": "min",
    "loss": "min",
    "ce": "min",
}

BUNDLED_MODELS = ("smollm2-135m",)
# random:<preset>: a tiny model from config paired with a real tokenizer.
RANDOM_PRESETS = (
    "tiny-digit",
    "tiny-qwen",
    "tiny-llama3",
    "tiny-gpt2",
    "tiny-char",
    "tiny-char3",
    "vlm-tiny",  # a tiny Llava: random CLIP vision tower + projector + the tiny-char Llama
)
# Presets whose tokenizer has multi-digit number tokens (LLaMA-3's 0-999, GPT-2's, char3's
# 1-3 digit chunks): the digit-level losses (jobs/losses/catalog.py) refuse them.
MULTI_DIGIT_PRESETS = ("tiny-llama3", "tiny-gpt2", "tiny-char3")
# Presets that see images; the other random presets are text-only.
VISION_PRESETS = ("vlm-tiny",)
# Generated image tasks (jobs/data/images.py): every example carries a picture.
ImageTask = Literal["dots", "bars", "clock_face"]
IMAGE_TASKS: tuple[str, ...] = get_args(ImageTask)
# add, mul, listsum, units: integer questions with bounded answers (jobs/data/integers);
# the image tasks are questions about a generated picture, for a vision-language model;
# jsonl rows may name an "image" file too; table: a CSV or JSONL table (jobs/spec/table.py).
TaskName = Literal[
    "arithmetic", "add", "mul", "listsum", "units", "gsm", "clock", "jsonl", "table", ImageTask
]  # fmt: skip
# Tasks that read the user's files (data.path / data.file): JSONL rows, or a table's rows.
FILE_TASKS = ("jsonl", "table")
ARITHMETIC_MODULES = (
    "add_or_sub",
    "add_sub_multiple",
    "mul",
    "div",
    "mixed",
    "mul_div_multiple",
)

# The largest seed a spec takes: a signed 64-bit integer (SQLite, numpy), with room for
# torch.manual_seed(seed + worker rank) below its 2**64 limit. Larger seeds were accepted
# and then failed on the worker (`worker_failed`).
MAX_SEED = 2**63 - 1


class Strict(BaseModel):
    """Base of every spec model: unknown fields and non-finite floats are errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)
