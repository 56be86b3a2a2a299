"""Issue 45 item 11 (N9): the OpenAI fine-tuning view of a job whose training succeeded
reads `running` while its model's registration is pending or retried, and `failed` with an
error object naming the registration once it has failed for good: never `succeeded` with
`fine_tuned_model` and `error` both null, which an OpenAI client would poll forever."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi.testclient import TestClient

from service.store.outbox import RegistrationOutbox
from tests.security.conftest import auth, token_for
from tests.support.fine_tuning import create, uploaded


def test_a_failed_registration_reads_failed_with_an_error(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    created = create(client, ann, model="random:tiny-digit", training_file=uploaded(client, ann))
    assert created.status_code == 200, created.text
    job_id = created.json()["id"]
    services = client.app.state.services  # type: ignore[attr-defined]
    services.jobs.transition(job_id, "queued", "submitted")
    services.jobs.transition(
        job_id, "submitted", "succeeded", registration_state="pending",
        registration_next_at=datetime.now(UTC),
    )  # fmt: skip

    def shown() -> dict[str, object]:
        r = client.get(f"/v1/fine_tuning/jobs/{job_id}", headers=auth(ann))
        assert r.status_code == 200, r.text
        out: dict[str, object] = r.json()
        return out

    pending = shown()
    assert (pending["status"], pending["fine_tuned_model"], pending["error"]) == (
        "running", None, None
    )  # fmt: skip
    outbox = RegistrationOutbox(services.db)
    assert outbox.retry(job_id, 1, "storage unreachable", datetime.now(UTC))
    assert shown()["status"] == "running"  # retrying: still on its way
    assert outbox.failed(job_id, 8, "checkpoint holds no .safetensors weights")
    failed = shown()
    assert failed["status"] == "failed" and failed["fine_tuned_model"] is None
    assert failed["error"] == {
        "code": "registration_failed",
        "message": "training succeeded but its model could not be registered: "
        "checkpoint holds no .safetensors weights",
        "param": None,
    }
    listed = client.get("/v1/fine_tuning/jobs", headers=auth(ann)).json()["data"]
    assert [j["status"] for j in listed] == ["failed"]
