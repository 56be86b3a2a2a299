"""The dashboard's Study page lists the caller's own studies (not another owner's) and a
study's live page shows its runs, its learning curves and, once compared, its verdicts."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from tests.support.api import auth, token_for
from tests.support.studies import app_on, body, finish, metrics, one_pass, services, upload
from tests.support.web import login


def test_study_page_lists_own_studies_and_a_live_one_shows_its_verdicts(tmp_path: Path) -> None:
    with TestClient(app_on(tmp_path), follow_redirects=False) as client:
        ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "submit")
        study = client.post("/v1/studies", json=body(upload(client, ann)), headers=auth(ann)).json()
        login(client, ann)
        listed = client.get("/ui/study").text
        assert f'href="/ui/studies/{study["id"]}"' in listed and "0/6" in listed
        live = client.get(f"/ui/studies/{study['id']}").text
        assert f'data-poll="/ui/studies/{study["id"]}/live"' in live
        assert live.count("<tr data-run=") == 6 and 'id="study-verdicts"' not in live
        svc = services(client)
        for i, run in enumerate(study["runs"]):
            finish(svc, run["job_id"], metrics(0.2 + 0.1 * (run["arm"] == "smmd") + 0.01 * i))
            svc.jobs.add_metrics(run["job_id"], 0, [{"step": 4, "eval_exact_match": 0.3}])
        one_pass(svc)
        fragment = client.get(f"/ui/studies/{study['id']}/live").text
        assert "data-terminal" in fragment and 'id="study-verdicts"' in fragment
        assert '<tr data-arm="smmd">' in fragment and 'data-series="smmd"' in fragment
        login(client, bob)
        assert f"/ui/studies/{study['id']}" not in client.get("/ui/study").text
        assert client.get(f"/ui/studies/{study['id']}").status_code == 404
