"""A study's power over REST and the CLI, Ray stubbed: `dry_run: true` answers 200 with the
plan and queues nothing (no study or job row, the backend never called); the plan's spread
is declared, or measured from an earlier study of the same owner on the same task, or
there is no plan; a finished study's result states its own power."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from fastapi import FastAPI
from fastapi.testclient import TestClient

from jobs.spec import load_spec_file
from jobs.stats.power import (
    Spread,
    detectable_effect,
    estimate_spread,
    questions_needed,
    seed_sd_upper,
    seeds_needed,
)
from service.app import create_app
from service.cli.studies import render
from service.jobs.reconciler import Reconciler
from service.settings import Settings
from service.studies.plan import NO_SPREAD
from tests.support.api import ADMIN, auth, token_for
from tests.support.cli import EXAMPLE, cli, service  # noqa: F401 (fixtures)
from tests.support.stub_backend import StubBackend
from tests.support.studies import body, finish, one_pass, services, upload

DECLARED = {"seed_sd": 0.01, "question_sd": 0.35, "target_effect": 0.05}
# Per (arm, seed), the 4 questions' answers: the paired differences smmd − ce are
# [0,0,1,0], [0,1,1,0], [0,0,0,1] (means 0.25, 0.5, 0.25).
ANSWERS = {
    ("ce", 0): [True, True, False, False],
    ("ce", 1): [True, False, False, False],
    ("ce", 2): [True, True, True, False],
    ("smmd", 0): [True, True, True, False],
    ("smmd", 1): [True, True, True, False],
    ("smmd", 2): [True, True, True, True],
}


@dataclass
class WatchedBackend(StubBackend):
    """The stub, with every call to Ray recorded."""

    calls: list[str] = field(default_factory=list)

    def submit(
        self, job_id: str, kind: str, spec_json: str, submission_id: str | None = None
    ) -> None:
        self.calls.append("submit")
        super().submit(job_id, kind, spec_json, submission_id)

    def info(self, job_id: str) -> Any:
        self.calls.append("info")
        return super().info(job_id)

    def stop(self, job_id: str) -> None:
        self.calls.append("stop")
        super().stop(job_id)

    def capacity(self) -> Any:
        self.calls.append("capacity")
        return super().capacity()


def app_on(home: Path, backend: StubBackend) -> FastAPI:
    return create_app(Settings(home=home, admin_token=ADMIN), backend=backend, reconcile=False)


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[TestClient, WatchedBackend]]:
    backend = WatchedBackend()
    with TestClient(app_on(tmp_path, backend)) as client:
        yield client, backend


def rows(client: TestClient) -> tuple[int, int]:
    """(job rows, study rows) in the database, every owner's."""
    svc = services(client)
    studies, _ = svc.studies.page(owner=None, limit=200, cursor=None)
    return sum(svc.jobs.count_by_status().values()), len(studies)


def test_dry_run_plans_and_queues_nothing(watched: tuple[TestClient, WatchedBackend]) -> None:
    client, backend = watched
    ann = token_for(client, "ann", "submit")
    file_id = upload(client, ann)
    r = client.post(
        "/v1/studies", json=body(file_id, power=DECLARED, dry_run=True), headers=auth(ann)
    )
    assert r.status_code == 200, r.text
    plan = r.json()
    assert plan["dry_run"] is True and plan["queued"] == 0
    assert (plan["arms"], plan["seeds"], plan["questions"], plan["runs"]) == (
        ["ce", "smmd"],
        3,
        4,
        6,
    )
    power = plan["power"]
    spread = Spread(0.01, 0.35)
    # One arm: a family of one, plain alpha 0.05; 3 seeds × 4 questions.
    assert power["test_level"] == pytest.approx(0.05) and power["family"] == 1
    assert power["detectable_effect"] == pytest.approx(detectable_effect(spread, 3, 4))
    assert power["seeds_needed"] == seeds_needed(0.05, spread, 4)
    assert power["target_effect"] == 0.05 and power["target_from"] == "declared"
    needed = questions_needed(0.05, spread, 3)
    assert needed is not None and power["questions_needed"] == needed > 4
    assert "declared in the spec" in power["statement"]
    assert power["cautious"] is None  # a declared spread has no bound to widen it to
    # Nothing recorded, nothing sent to Ray, even after a reconciler's pass.
    svc = services(client)
    reconciler = Reconciler(svc.jobs, backend, svc.settings.storage_root)
    reconciler.run_once()
    assert rows(client) == (0, 0)
    assert "submit" not in backend.calls and backend.submitted == []
    # The same body without dry_run is a study: its jobs are queued, and the same pass
    # sends them to the (watched) backend.
    r = client.post("/v1/studies", json=body(file_id, power=DECLARED), headers=auth(ann))
    assert r.status_code == 202, r.text
    assert rows(client) == (6, 1)
    reconciler.run_once()
    assert "submit" in backend.calls
    assert r.json()["spec"]["power"]["seed_sd"] == 0.01 and "dry_run" not in r.json()["spec"]


def test_without_a_spread_the_plan_says_so_and_bad_power_is_a_422(
    watched: tuple[TestClient, WatchedBackend],
) -> None:
    client, _ = watched
    ann = token_for(client, "ann", "submit")
    file_id = upload(client, ann)
    r = client.post("/v1/studies", json=body(file_id, dry_run=True), headers=auth(ann))
    assert r.status_code == 200, r.text
    assert r.json()["power"] is None and r.json()["detail"] == NO_SPREAD
    for power, named in [
        ({"seed_sd": 0.01}, "question_sd"),
        ({"seed_sd": 0.0, "question_sd": 0.0}, "both 0"),
        ({"seed_sd": 0.01, "question_sd": 0.3, "from_study": "study-x"}, "from_study"),
        ({"target_effect": -0.1}, "target_effect"),
    ]:
        r = client.post(
            "/v1/studies", json=body(file_id, power=power, dry_run=True), headers=auth(ann)
        )
        assert r.status_code == 422, r.text
        assert named in r.text
    # A study of nobody's (or another owner's) is a 422 naming power.from_study.
    r = client.post(
        "/v1/studies",
        json=body(file_id, power={"from_study": "study-nope"}, dry_run=True),
        headers=auth(ann),
    )
    assert r.status_code == 422 and "power.from_study" in r.text
    assert rows(client) == (0, 0)


def finished_study(client: TestClient, token: str, file_id: str) -> dict[str, Any]:
    """A 3-seed study of ce and smmd, every run ended with ANSWERS, compared."""
    study = client.post("/v1/studies", json=body(file_id), headers=auth(token)).json()
    svc = services(client)
    for run in study["runs"]:
        answers = ANSWERS[run["arm"], run["seed"]]
        em = sum(answers) / len(answers)
        finish(svc, run["job_id"], {"metrics": {"eval_exact_match": em}}, answers)
    one_pass(svc)
    done: dict[str, Any] = client.get(f"/v1/studies/{study['id']}", headers=auth(token)).json()
    assert done["status"] == "succeeded", done
    return done


def test_a_finished_study_states_its_power_and_plans_the_next(
    watched: tuple[TestClient, WatchedBackend],
) -> None:
    client, _ = watched
    ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "submit")
    file_id = upload(client, ann)
    done = finished_study(client, ann, file_id)
    diffs = np.array([[0, 0, 1, 0], [0, 1, 1, 0], [0, 0, 0, 1]], dtype=float)
    expected = estimate_spread(diffs)
    power = done["result"]["power"]
    (arm,) = power["arms"]
    assert arm["arm"] == "smmd"
    assert arm["seed_sd"] == pytest.approx(expected.seed_sd)
    assert arm["question_sd"] == pytest.approx(expected.question_sd)
    assert arm["observed_sd"] == pytest.approx(np.std(diffs.mean(axis=1), ddof=1))
    own = Spread(expected.seed_sd, expected.question_sd)
    assert arm["detectable_effect"] == pytest.approx(detectable_effect(own, 3, 4))
    ci = next(a for a in done["result"]["comparison"]["arms"] if a["arm"] == "smmd")["vs_ce"]["ci"]
    assert ci["low"] < 0 < ci["high"]  # 3 seeds: the CI spans 0
    assert arm["rules_out"].startswith("rules out improvements larger than")
    assert power["target_from"] == "equivalence margin" and power["target_effect"] == 0.02
    # The next study plans from it: same owner, same task.
    plan = client.post(
        "/v1/studies",
        json=body(
            file_id,
            name="next",
            seeds=list(range(8)),
            power={"from_study": done["id"]},
            dry_run=True,
        ),
        headers=auth(ann),
    ).json()
    assert plan["power"]["seed_sd"] == pytest.approx(expected.seed_sd)
    assert done["id"] in plan["power"]["source"]
    # A spread measured on 3 seeds: the plan also states the design at the seed part's
    # 80 % upper bound.
    upper = seed_sd_upper(expected)
    assert arm["seed_sd_upper"] == pytest.approx(upper) and upper > expected.seed_sd
    cautious = plan["power"]["cautious"]
    assert cautious["seed_sd"] == pytest.approx(upper)
    wide = detectable_effect(Spread(upper, expected.question_sd), 8, 4)
    assert cautious["detectable_effect"] == pytest.approx(wide)
    assert "80 % upper bound" in plan["power"]["statement"]
    assert plan["power"]["detectable_effect"] == pytest.approx(detectable_effect(own, 8, 4))
    # Another owner cannot plan from it; another task cannot either.
    bob_file = upload(client, bob)
    r = client.post(
        "/v1/studies",
        json=body(bob_file, power={"from_study": done["id"]}, dry_run=True),
        headers=auth(bob),
    )
    assert r.status_code == 422 and "of yours" in r.text
    other = body(upload(client, ann), power={"from_study": done["id"]}, dry_run=True)
    r = client.post("/v1/studies", json=other, headers=auth(ann))
    assert r.status_code == 422 and "another task or data" in r.text


def test_cli_study_plan_prints_the_plan_and_queues_nothing(
    cli: Any,  # noqa: F811
    service: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    base = load_spec_file(EXAMPLE)
    study = {
        "name": "plan-cli",
        "base": base,
        "arms": [{"name": "emd"}, {"name": "smmd"}],
        "seeds": [0, 1, 2, 3, 4],
        "power": DECLARED,
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    submitted = list(service.backend.names)
    result = cli("study", "plan", str(path))
    assert result.exit_code == 0, result.output
    questions = base["data"]["eval_size"]  # type: ignore[index]
    mde = detectable_effect(Spread(0.01, 0.35), 5, questions, family=2)
    assert "dry run, nothing queued" in result.output
    assert f"±{mde:.3g}" in result.output
    assert "alpha 0.05/2" in result.output  # two arms: Holm's strictest step
    assert service.backend.names == submitted
    # `study run` of a spec that asks for a dry run plans it too, and queues nothing.
    path.write_text(yaml.safe_dump({**study, "dry_run": True}))
    result = cli("study", "run", str(path))
    assert result.exit_code == 0 and f"±{mde:.3g}" in result.output
    assert service.backend.names == submitted
    # No spread: the plan says what it needs; a bad one is a usage error naming the field.
    path.write_text(yaml.safe_dump({**study, "power": None}))
    result = cli("study", "plan", str(path))
    assert result.exit_code == 0 and "power.from_study" in result.output
    path.write_text(yaml.safe_dump({**study, "power": {"seed_sd": 0.1}}))
    result = cli("study", "plan", str(path))
    assert result.exit_code != 0 and "question_sd" in result.output


def test_study_show_prints_the_power_statement(capsys: pytest.CaptureFixture[str]) -> None:
    power = {
        "statement": "With 3 seeds × 4 questions … ±0.31 …",
        "arms": [{"arm": "smmd", "rules_out": "rules out improvements larger than 0.6"}],
    }
    result = {"comparison": {"primary": "exact_match", "arms": []}, "power": power}
    study = {"id": "study-1", "status": "succeeded", "name": "s", "ended": 6, "runs": [{}] * 6}
    study["result"] = result
    render(study)
    out = capsys.readouterr().out
    assert "power: With 3 seeds × 4 questions … ±0.31 …" in out
    assert "- smmd: its 95 % CI rules out improvements larger than 0.6" in out
