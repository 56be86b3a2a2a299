"""/v1/fine_tuning/jobs with Ray stubbed: a create is the same job record /v1/jobs shows,
its metrics are events and its checkpoints carry their registry reference."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.support.api import ADMIN, auth, token_for
from tests.support.fine_tuning import create, uploaded
from tests.support.stub_backend import StubBackend

LOSS = {"name": "smmd", "weight": 0.5, "bandwidth": 1.5}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path, admin_token=ADMIN)
    with TestClient(create_app(settings, backend=StubBackend(), reconcile=False)) as c:
        yield c


def test_a_create_is_one_job_record_shown_two_ways(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    file_id = uploaded(client, ann)
    method = {"type": "supervised", "supervised": {"hyperparameters": {
        "n_epochs": 3, "batch_size": 4, "learning_rate_multiplier": 20}}}  # fmt: skip
    r = create(client, ann, model="random:tiny-digit", training_file=file_id, method=method,
               suffix="sums", seed=7, metadata={"team": "a"}, numeric_loss=LOSS)  # fmt: skip
    assert r.status_code == 200, r.text
    ft = r.json()
    assert (ft["status"], ft["training_file"], ft["seed"]) == ("queued", file_id, 7)
    assert ft["hyperparameters"] == {"n_epochs": 3, "batch_size": 4, "learning_rate_multiplier": 20}
    assert ft["metadata"] == {"team": "a"} and ft["user_provided_suffix"] == "sums"
    job = client.get(f"/v1/jobs/{ft['id']}", headers=auth(ann)).json()
    spec = job["spec"]
    assert spec["name"].startswith("ft-sums-") and spec["register_as"] == spec["name"]
    assert {k: spec["loss"][k] for k in LOSS} == LOSS
    assert spec["train"]["epochs"] == 3 and spec["train"]["lr"] == pytest.approx(2e-3)
    # 16 rows, no validation file: one held out of the training file.
    assert (spec["data"]["file"], spec["data"]["eval_size"]) == (file_id, 1)


def test_events_checkpoints_and_the_fine_tuned_model(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    ft = create(client, ann, model="random:tiny-digit", training_file=uploaded(client, ann),
                numeric_loss=LOSS).json()  # fmt: skip
    services = client.app.state.services  # type: ignore[attr-defined]
    store, job_id = services.jobs, ft["id"]
    checkpoint = f"/storage/runs/{job_id}/train/checkpoint_000000"
    rows = [{"step": s, "loss": 2.0 / s, "ce": 1.5 / s, "smmd": 0.5 / s} for s in (1, 2, 3)]
    store.add_metrics(job_id, 0, [*rows[:2], {**rows[2], "checkpoint": checkpoint}])
    for before, after in (("queued", "submitted"), ("submitted", "running"),
                          ("running", "succeeded")):  # fmt: skip
        assert store.transition(job_id, before, after)
    name = client.get(f"/v1/jobs/{job_id}", headers=auth(ann)).json()["name"]
    number = services.registry.store.reserve_version(name, "ann")
    services.registry.store.add_version(
        name, number, job_id=job_id, source=checkpoint, artifact="a", files={}, spec={},
        dataset={}, metrics={},
    )  # fmt: skip

    done = client.get(f"/v1/fine_tuning/jobs/{job_id}", headers=auth(ann)).json()
    assert done["status"] == "succeeded" and done["fine_tuned_model"] == f"{name}:1"
    first = client.get(f"/v1/fine_tuning/jobs/{job_id}/events", params={"limit": 3},
                       headers=auth(ann)).json()  # fmt: skip
    assert [e["message"] for e in first["data"][:2]] == [
        f"Registered as {name}:1", "The job has successfully completed"]  # fmt: skip
    assert first["has_more"] is True
    rest = client.get(f"/v1/fine_tuning/jobs/{job_id}/events",
                      params={"after": first["data"][-1]["id"], "limit": 50},
                      headers=auth(ann)).json()  # fmt: skip
    steps = [e for e in first["data"] + rest["data"] if e["type"] == "metrics"]
    assert [e["data"]["step"] for e in steps] == [3, 2, 1] and rest["has_more"] is False
    assert "smmd=0.25" in steps[1]["message"]
    [point] = client.get(f"/v1/fine_tuning/jobs/{job_id}/checkpoints",
                         headers=auth(ann)).json()["data"]  # fmt: skip
    assert (point["step_number"], point["fine_tuned_model_checkpoint"]) == (3, f"{name}:1")
    assert point["metrics"]["train_loss"] == pytest.approx(2 / 3)


def test_list_pages_with_after_and_owners_see_only_theirs(client: TestClient) -> None:
    ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "submit")
    file_id = uploaded(client, ann)
    ids = [create(client, ann, model="random:tiny-digit", training_file=file_id).json()["id"]
           for _ in range(3)]  # fmt: skip
    page = client.get("/v1/fine_tuning/jobs", params={"limit": 2}, headers=auth(ann)).json()
    assert [j["id"] for j in page["data"]] == ids[:0:-1] and page["has_more"] is True
    after = {"limit": 2, "after": ids[1]}
    last = client.get("/v1/fine_tuning/jobs", params=after, headers=auth(ann)).json()
    assert [j["id"] for j in last["data"]] == ids[:1] and last["has_more"] is False
    assert client.get("/v1/fine_tuning/jobs", headers=auth(bob)).json()["data"] == []
    assert client.get(f"/v1/fine_tuning/jobs/{ids[0]}", headers=auth(bob)).status_code == 404
    cancelled = client.post(f"/v1/fine_tuning/jobs/{ids[0]}/cancel", headers=auth(ann))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


BAD_CREATES = [
    ("unknown loss", {"numeric_loss": {"name": "l2"}}, "numeric_loss.name"),
    ("bad loss knob", {"numeric_loss": {"name": "mmd", "bandwidth": -1}}, "numeric_loss.bandwidth"),
    ("digit loss, multi-digit tokenizer", {"model": "random:tiny-llama3",
     "numeric_loss": {"name": "del"}}, "numeric_loss.name"),
    ("unknown preset", {"model": "random:huge"}, "model"),
    ("dpo", {"method": {"type": "dpo"}}, "method.type"),
    ("both hyperparameter sets", {"hyperparameters": {}, "method": {"type": "supervised"}},
     "hyperparameters"),
    ("bad epochs", {"hyperparameters": {"n_epochs": 0}},
     "hyperparameters.n_epochs.constrained-int"),
    ("bob's file", {"training_file": "bob"}, "training_file"),
    ("unknown field", {"integrations": []}, "integrations"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "field"), [c[1:] for c in BAD_CREATES],
                         ids=[c[0] for c in BAD_CREATES])  # fmt: skip
def test_a_bad_create_is_a_422_naming_the_field_and_records_nothing(
    client: TestClient, change: dict[str, Any], field: str
) -> None:
    ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "submit")
    body = {"model": "random:tiny-digit", "training_file": uploaded(client, ann), **change}
    if change.get("training_file") == "bob":
        body["training_file"] = uploaded(client, bob)
    r = create(client, ann, **body)
    assert r.status_code == 422, r.text
    assert field in [p["field"] for p in r.json()["detail"]], json.dumps(r.json())
    assert client.get("/v1/jobs", headers=auth(ann)).json()["items"] == []
    assert create(client, token_for(client, "ann", "read"), **body).status_code == 403
