"""Serving fixtures shared by the serving tests and bench/serve_load.py: checkpoints (a tiny
"digit writer", the bundled SmolLM2-135M, a LoRA adapter on it) registered as model versions
in a throw-away NUMTUNE_HOME like trained ones, read tokens, a free port.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Callable
from pathlib import Path

import torch

from jobs.losses.vocab import NumericVocab
from jobs.modeling.folders import bundled_dir
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import JobSpec, ModelSpec
from jobs.train.checkpoint import SPEC_FILE, save_checkpoint
from service.registry import ModelVersion, Registry
from service.settings import Settings
from service.store import Database, JobStore, TokenStore, migrate

TINY = "random:tiny-digit"
SMOLLM2 = "bundled:smollm2-135m"
CHECKPOINT = "train/checkpoint_000000"


def digit_writer(out: Path, *, seed: int = 0) -> Path:
    """Save a tiny-digit checkpoint whose every next token is a digit (never end-of-text).

    Untied head; input embeddings get a large constant in feature 0, so the final hidden
    state's normalised feature 0 is ≈ +sqrt(64) whatever the text; the head's column 0 is
    +4 for the ten digit tokens and −4 elsewhere, so digits lead by ~60 logits. Which digit
    still depends on the random weights.
    """
    model, tok = load_model_and_tokenizer(ModelSpec(source=TINY), seed=seed)
    digits = NumericVocab.from_tokenizer(tok).token_ids
    inputs, output = model.get_input_embeddings(), model.get_output_embeddings()
    assert isinstance(inputs, torch.nn.Embedding) and isinstance(output, torch.nn.Linear)
    with torch.no_grad():
        model.config.tie_word_embeddings = False
        embed = inputs.weight  # [V, 64]
        head = torch.nn.Parameter(embed.detach().clone())  # [V, 64]
        output.weight = head
        embed[:, 0] = 4.0
        head[:, 0] = -4.0
        head[digits, 0] = 4.0
    spec = JobSpec.model_validate(
        {"name": "digits", "model": {"source": TINY, "use_chat_template": False},
         "data": {"task": "arithmetic"}}
    )  # fmt: skip
    save_checkpoint(out, model=model, tokenizer=tok, spec=spec, metrics={"step": 1})
    return out


def smollm2(out: Path) -> Path:
    """The bundled SmolLM2-135M-Instruct (safetensors, converted once) as a checkpoint."""
    shutil.copytree(bundled_dir(SMOLLM2.removeprefix("bundled:")), out)
    spec = JobSpec.model_validate({"name": "smollm2", "model": {"source": SMOLLM2}})
    (out / SPEC_FILE).write_text(spec.model_dump_json(indent=2))
    return out


def random_lora(spec: JobSpec, out: Path, *, seed: int, scale: float) -> Path:
    """A LoRA adapter checkpoint of `spec` (its model.adapter) whose B is drawn at random,
    N(0, scale²), as after training (a fresh adapter's B is zero): it changes answers."""
    model, tok = load_model_and_tokenizer(spec.model, seed=0)  # wrapped, B at zero
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, weights in model.named_parameters():
            if "lora_B" in name:
                weights.copy_(torch.randn(weights.shape, generator=generator) * scale)
    save_checkpoint(out, model=model, tokenizer=tok, spec=spec, metrics={"step": 1})
    return out


def smollm2_lora(out: Path) -> Path:
    """A rank-8 LoRA adapter (q and v) on the bundled SmolLM2 that changes some answers."""
    spec = JobSpec.model_validate({
        "name": "smollm2-lora", "model": {"source": SMOLLM2, "adapter": {"r": 8}},
    })  # fmt: skip
    return random_lora(spec, out, seed=0, scale=0.05)


def register_checkpoint(
    settings: Settings,
    *,
    name: str,
    owner: str,
    alias: str | None = None,
    seed: int = 0,
    build: Callable[[Path], Path] | None = None,
) -> ModelVersion:
    """A job row for `owner`, a checkpoint in its run folder (the digit writer unless
    `build` makes another), registered as the next version of `name` (and `alias`)."""
    db = Database(settings.database_url)
    migrate(db.engine)
    job, _ = JobStore(db).create(
        kind="job", name=name, owner=owner, spec={"name": name, "model": {"source": TINY}}
    )
    folder = Path(settings.storage_root) / "runs" / job.id / CHECKPOINT
    if build is None:
        digit_writer(folder, seed=seed)
    else:
        build(folder)
    registry = Registry(db, settings.storage_root, settings.home / "cache")
    row = registry.register(name=name, owner=owner, job=job, checkpoint=CHECKPOINT)
    if alias is not None:
        registry.store.set_alias(name, alias, row.version)
    version = registry.resolve(f"{name}:{row.version}")
    db.dispose()
    return version


def new_token(settings: Settings, owner: str, scopes: list[str]) -> str:
    db = Database(settings.database_url)
    migrate(db.engine)
    secret = TokenStore(db).create(owner, scopes)[1]
    db.dispose()
    return secret


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
