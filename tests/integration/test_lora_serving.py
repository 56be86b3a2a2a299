"""LoRA end to end on a local Ray: two adapter jobs with different losses are registered as
two adapter versions (a small fraction of the full model's bytes), and both answer through
the `openai` client from one serving replica that loaded their base once."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from ray import serve

from jobs.modeling.folders import save_pretrained_safetensors
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import ModelSpec
from jobs.train.runner import run_job
from service.registry import Registry
from service.serving.api import ServeConfig
from service.serving.deploy import APP_NAME, deploy
from service.settings import Settings
from service.store import Database, JobStore, TokenStore, migrate
from tests.support.training import tiny_spec

pytestmark = [pytest.mark.ray, pytest.mark.slow]

LORA = {"r": 4, "alpha": 8.0, "target_modules": ["q_proj", "v_proj"]}
BASE = "random:tiny-digit"
PROMPT = "What is 12 + 30?"


def _weights_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.safetensors"))


def test_two_lora_jobs_answer_from_one_base_on_one_replica(
    ray_cluster: str, tmp_path: Path
) -> None:
    settings = Settings(home=tmp_path / "home", dev=True)
    db = Database(settings.database_url)
    migrate(db.engine)
    jobs, registry = JobStore(db), Registry(db, settings.storage_root, tmp_path / "cache")
    refs = []
    for loss in ("ce", "smmd"):
        spec = tiny_spec(
            name=f"lora-{loss}",
            model={"adapter": LORA},
            loss={"name": loss},
            train={"steps": 10, "eval_every": 10, "checkpoint_every": 10, "lr": 0.01},
            scaling={"num_workers": 1},
        )
        row, _ = jobs.create(
            kind="job", name=spec.name, owner="alice", spec=spec.model_dump(mode="json")
        )
        result = run_job(spec, row.id, settings.storage_root)
        assert result.status == "succeeded", result.detail
        assert result.best_checkpoint is not None
        version = registry.register(
            name=spec.name, owner="alice", job=row, checkpoint=result.best_checkpoint
        )
        refs.append(f"{version.name}:{version.version}")

    # Each version is the adapter: its weights a few per cent of the full model's.
    model, tokenizer = load_model_and_tokenizer(ModelSpec(source=BASE))
    full = _weights_bytes(save_pretrained_safetensors(model, tokenizer, tmp_path / "full"))
    for ref in refs:
        info = registry.resolve(ref)
        assert info.base is not None and info.base.source == BASE
        assert "model.safetensors" not in info.files
        folder = Path(settings.storage_root) / "registry" / info.name / f"v{info.version}"
        assert 0 < _weights_bytes(folder) < 0.05 * full, ref
    secret = TokenStore(db).create("alice", ["read"])[1]
    db.dispose()

    port = _free_port()
    deploy(settings, port=port, config=ServeConfig(batch_wait_s=0.05))
    try:
        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key=secret, max_retries=0, timeout=120
        )
        listed = {m.id for m in client.models.list().data}
        assert set(refs) <= listed  # adapter versions are models
        ce, smmd = refs
        text = client.completions.create(model=ce, prompt=PROMPT, max_tokens=4, temperature=0)
        assert text.model == ce and isinstance(text.choices[0].text, str)
        chat = client.chat.completions.create(
            model=smmd,
            messages=[{"role": "user", "content": "What is 7 + 8?"}],
            max_tokens=4,
            temperature=0,
        )
        assert chat.model == smmd and chat.choices[0].message.content is not None
        again = client.completions.create(model=ce, prompt=PROMPT, max_tokens=4, temperature=0)
        assert again.choices[0].text == text.choices[0].text  # switched back, same answer

        # One replica, one base, both adapters on it.
        handle = serve.get_deployment_handle("NumtuneServing", app_name=APP_NAME)
        assert handle.loaded_bases.remote().result() == {BASE: sorted(refs)}
    finally:
        serve.delete(APP_NAME)
        serve.shutdown()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
