"""The registry tests' control plane (Ray stubbed, the reconciler off, storage in the test's
home) and a job that succeeded with a real checkpoint folder in its run folder, ready to be
registered."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import JobSpec
from jobs.train.checkpoint import save_checkpoint
from service.app import create_app
from service.settings import Settings
from tests.support.stub_backend import StubBackend

ADMIN = "adm_Yq8wE3rT6yU1iO4pA7sD2fG5hJ9kL0zX"
SPEC = JobSpec.model_validate(
    {"name": "arith", "model": {"source": "random:tiny-digit"}, "loss": {"name": "smmd"}}
)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path, admin_token=ADMIN, storage=str(tmp_path / "storage"))
    with TestClient(create_app(settings, backend=StubBackend(), reconcile=False)) as c:
        yield c


def auth(token: str = ADMIN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def finished_job(client: TestClient, owner: str = "admin") -> Any:
    """A job row that succeeded with a real checkpoint folder in its run folder."""
    services = client.app.state.services  # type: ignore[attr-defined]
    row, _ = services.jobs.create(
        kind="job", name="arith", owner=owner, spec=SPEC.model_dump(mode="json")
    )
    run = Path(services.settings.storage_root) / "runs" / row.id
    ckpt = run / "train" / "checkpoint_000001"
    model, tokenizer = load_model_and_tokenizer(SPEC.model, seed=0)
    save_checkpoint(
        ckpt,
        model=model,
        tokenizer=tokenizer,
        spec=SPEC,
        metrics={"step": 5, "eval_mae": 3.0},
    )
    (ckpt / "trainer_state.pt").write_bytes(b"pickled optimizer state")
    services.jobs.transition(row.id, "queued", "submitted")
    services.jobs.transition(
        row.id,
        "submitted",
        "succeeded",
        best_checkpoint=str(ckpt),
        result={"status": "succeeded", "metrics": {"eval_mae": 3.0}},
    )
    return services.jobs.get(row.id), ckpt
