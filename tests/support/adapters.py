"""LoRA adapter jobs for the registry and serving tests: a spec with or without an adapter,
and a succeeded job whose checkpoint is that spec's model after one step that moves the
adapter's B (so that the adapter is no longer a no-op)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from fastapi.testclient import TestClient

from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import JobSpec
from jobs.train.checkpoint import save_checkpoint

LORA = {"r": 4, "alpha": 8.0}


def spec(source: str, adapter: dict[str, Any] | None = LORA, loss: str = "smmd") -> JobSpec:
    model = {"source": source, "use_chat_template": False, "adapter": adapter}
    return JobSpec.model_validate({"name": "arith", "model": model, "loss": {"name": loss}})


def finished(client: TestClient, spec: JobSpec) -> tuple[Any, Path]:
    """A succeeded job whose checkpoint is `spec`'s model after one step that moves B."""
    services = client.app.state.services  # type: ignore[attr-defined]
    row, _ = services.jobs.create(
        kind="job", name="arith", owner="admin", spec=spec.model_dump(mode="json")
    )
    ckpt = Path(services.settings.storage_root) / "runs" / row.id / "train" / "checkpoint_1"
    model, tokenizer = load_model_and_tokenizer(spec.model, seed=0)
    ids = torch.tensor([tokenizer("12+30=42")["input_ids"]])
    model(input_ids=ids).logits.pow(2).mean().backward()
    step = 0.5 if spec.loss.name == "smmd" else 0.2  # two losses, two different adapters
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.sub_(step * p.grad)  # one plain step: the adapter is no longer a no-op
    save_checkpoint(ckpt, model=model, tokenizer=tokenizer, spec=spec, metrics={"step": 1})
    services.jobs.transition(row.id, "queued", "submitted")
    services.jobs.transition(
        row.id, "submitted", "succeeded", best_checkpoint=str(ckpt), result={"metrics": {}}
    )
    return services.jobs.get(row.id), ckpt
