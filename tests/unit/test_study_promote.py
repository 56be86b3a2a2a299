"""Which arm a study promotes: only one significantly better than ce after Holm, in the
metric's better direction; the best such difference when several are. And the promotion
itself: the winner's best run registered, the alias pointed at it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import JobSpec, ModelSpec, StudySpec
from jobs.train.checkpoint import save_checkpoint
from service.studies.progress import winner
from tests.support.api import auth, token_for
from tests.support.studies import app_on, body, finish, metrics, one_pass, services, upload

BASE = {"name": "b", "model": {"source": "random:tiny-char"}}


def spec(primary: str = "exact_match") -> StudySpec:
    return StudySpec.model_validate(
        {
            "name": "s",
            "base": BASE,
            "arms": [{"name": "smmd"}, {"name": "emd"}],
            "primary_metric": primary,
            "promote": "production",
        }
    )


def comparison(*arms: tuple[str, float | None, float | None]) -> dict[str, Any]:
    rows = [{"arm": "ce", "vs_ce": None}]
    rows += [{"arm": a, "vs_ce": {"diff": d, "p_holm": p}} for a, d, p in arms]
    return {"arms": rows}


def test_the_best_significant_improvement_wins() -> None:
    found = comparison(("smmd", 0.13, 0.008), ("emd", 0.2, 0.04))
    assert winner(spec(), found) == "emd"


def test_not_significant_after_holm_or_worse_is_not_promoted() -> None:
    assert winner(spec(), comparison(("smmd", 0.13, 0.06), ("emd", -0.2, 0.001))) is None
    assert winner(spec(), comparison(("smmd", 0.0, 0.0), ("emd", None, None))) is None


def test_lower_is_better_metrics_promote_a_decrease() -> None:
    found = comparison(("smmd", -3.0, 0.01), ("emd", 2.0, 0.001))
    assert winner(spec("mae"), found) == "smmd"


def test_a_significant_winner_is_registered_and_the_alias_moved(tmp_path: Path) -> None:
    """The whole loop with Ray stubbed: smmd beats ce on all three seeds (paired t, Holm
    over its one test: p < 0.05), so its best run (seed 0) becomes production."""
    with TestClient(app_on(tmp_path)) as client:
        ann = token_for(client, "ann", "submit")
        spec = body(upload(client, ann), promote="production")
        study = client.post("/v1/studies", json=spec, headers=auth(ann)).json()
        svc = services(client)
        exact = {("ce", 0): 0.50, ("ce", 1): 0.55, ("ce", 2): 0.40,
                 ("smmd", 0): 0.75, ("smmd", 1): 0.75, ("smmd", 2): 0.62}  # fmt: skip
        model, tokenizer = load_model_and_tokenizer(ModelSpec(source="random:tiny-char"), seed=0)
        for run in study["runs"]:
            job = svc.jobs.get(run["job_id"])
            assert job is not None
            ckpt = Path(svc.settings.storage_root) / "runs" / job.id / "train" / "checkpoint_1"
            job_spec = JobSpec.model_validate(job.spec)
            save_checkpoint(ckpt, model=model, tokenizer=tokenizer, spec=job_spec, metrics={})
            em = exact[run["arm"], run["seed"]]
            finish(svc, job.id, metrics(em), best_checkpoint=str(ckpt))
        one_pass(svc)
        done = client.get(f"/v1/studies/{study['id']}", headers=auth(ann)).json()
        promoted = done["result"]["promoted"]
        best = next(r for r in study["runs"] if (r["arm"], r["seed"]) == ("smmd", 0))
        assert promoted["done"] is True, promoted
        assert (promoted["arm"], promoted["job_id"], promoted["model"]) == (
            "smmd", best["job_id"], "units",
        )  # fmt: skip
        model_info = client.get("/v1/models/units", headers=auth(ann)).json()
        assert model_info["aliases"] == {"production": promoted["version"]}
