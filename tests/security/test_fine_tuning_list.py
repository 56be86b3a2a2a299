"""Issue 30 item 9 (M6): a listed job whose hyperparameters lie outside the create's limits
(lr 0.5 through POST /v1/jobs, 5,000× the default) still lists; the view only shows."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.security.conftest import ADMIN, auth, token_for
from tests.unit.api_cases import with_


def test_a_job_with_a_large_lr_lists_for_its_owner_and_the_admin(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    r = client.post("/v1/jobs", json=with_("train.lr", 0.5), headers=auth(ann))
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    for token in (ann, ADMIN):
        listed = client.get("/v1/fine_tuning/jobs", headers=auth(token))
        assert listed.status_code == 200, listed.text
        (shown,) = [j for j in listed.json()["data"] if j["id"] == job_id]
        assert shown["hyperparameters"]["learning_rate_multiplier"] == 5000
        one = client.get(f"/v1/fine_tuning/jobs/{job_id}", headers=auth(token))
        assert one.status_code == 200, one.text
