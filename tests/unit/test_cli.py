"""The `numtune` CLI against the real app served by uvicorn on loopback; only Ray is a
stub (our own logic under test: requests, messages, exit codes, progress end)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import Result

from jobs.records.run_files import RunFiles
from jobs.spec import load_spec_file
from service.cli.processes import free_ports
from tests.support.cli import EXAMPLE, Service, cli, service

__all__ = ["cli", "service"]  # the fixtures, from the support package

JOB_ID = re.compile(r"\b(job-[0-9a-f]{16})\b")


def spec_file(tmp_path: Path, name: str = "tiny", **sections: dict[str, Any]) -> Path:
    """examples/tiny-smmd.yaml with a new name and sections merged, as YAML."""
    data = load_spec_file(EXAMPLE)
    data["name"] = name
    for key, value in sections.items():
        base = data[key]
        data[key] = {**base, **value} if isinstance(base, dict) else value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def submitted_id(result: Result) -> str:
    assert result.exit_code == 0, result.output
    found = JOB_ID.search(result.output)
    assert found, result.output
    return found.group(1)


def wait_status(cli: Any, job_id: str, status: str, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        out = cli("status", job_id).output
        if re.search(rf"^status:\s+{status}$", out, re.M):
            return
        assert time.monotonic() < deadline, out
        time.sleep(0.05)


def test_submit_list_status(cli: Any, service: Service) -> None:
    job_id = submitted_id(cli("submit", str(EXAMPLE)))
    wait_status(cli, job_id, "running")  # the reconciler handed it to (stub) Ray
    assert service.backend.states[job_id] == "RUNNING"
    listed = cli("list", "--status", "running", "--limit", "200")
    assert listed.exit_code == 0 and job_id in listed.output and "tiny-smmd" in listed.output
    assert job_id not in cli("list", "--status", "succeeded", "--limit", "200").output
    assert job_id in cli("list", "--name", "tiny-smmd").output
    record = json.loads(cli("status", job_id, "--json").output)
    assert record["id"] == job_id and record["spec"]["loss"]["name"] == "smmd"


def test_submit_follow_shows_the_end(cli: Any, tmp_path: Path) -> None:
    spec = spec_file(tmp_path, "finish-now", train={"steps": 6})
    result = cli("submit", str(spec), "--follow")
    assert result.exit_code == 0, result.output
    job_id = submitted_id(result)
    assert f"job {job_id} succeeded" in result.output
    assert "eval_exact_match=0.5" in result.output
    logs = cli("logs", job_id)
    assert logs.exit_code == 0 and "the last line" in logs.output
    followed = cli("logs", job_id, "-f")  # a finished job: the whole log, then the end
    assert followed.exit_code == 0 and "the last line" in followed.output
    assert f"-- {job_id} succeeded" in followed.output


def test_cancel_conflict_delete(cli: Any, service: Service, tmp_path: Path) -> None:
    job_id = submitted_id(cli("submit", str(spec_file(tmp_path, "to-cancel"))))
    wait_status(cli, job_id, "running")
    result = cli("cancel", job_id)
    assert result.exit_code == 0 and f"{job_id} cancelled" in result.output
    assert job_id in service.backend.stopped
    again = cli("cancel", job_id)
    assert again.exit_code == 1
    assert f"conflict (409): job {job_id} already cancelled" in again.output
    assert cli("delete", job_id).exit_code == 0
    gone = cli("status", job_id)
    assert gone.exit_code == 1 and "not_found (404)" in gone.output


def test_idempotency_key_returns_the_same_job(cli: Any, tmp_path: Path) -> None:
    spec = str(spec_file(tmp_path, "once"))
    first = submitted_id(cli("submit", spec, "--idempotency-key", "k-1"))
    assert submitted_id(cli("submit", spec, "--idempotency-key", "k-1")) == first
    other = cli("submit", str(EXAMPLE), "--idempotency-key", "k-1")
    assert other.exit_code == 1 and "conflict (409)" in other.output


def test_missing_and_malformed_spec_files(cli: Any, tmp_path: Path) -> None:
    missing = cli("submit", str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 2
    assert f"spec file {tmp_path / 'nope.yaml'}: no such file" in missing.output
    (tmp_path / "list.yaml").write_text("- just\n- a list\n")
    listed = cli("submit", str(tmp_path / "list.yaml"))
    assert listed.exit_code == 2 and "not a YAML or JSON mapping" in listed.output
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n")
    broken = cli("tune", str(tmp_path / "broken.yaml"))
    assert broken.exit_code == 2 and "broken.yaml" in broken.output


@pytest.mark.parametrize(
    ("sections", "field"),
    [
        ({"loss": {"bandwidth": -1.0}}, "loss.bandwidth"),
        ({"loss": {"name": "no-such-loss"}}, "loss.name"),
        ({"train": {"steps": 0}}, "train.steps"),
        ({"data": {"path": "/no/such/file.jsonl", "task": "jsonl"}}, "data"),
    ],
)
def test_bad_field_is_named(
    cli: Any, service: Service, tmp_path: Path, sections: dict[str, Any], field: str
) -> None:
    name = "bad-" + field.replace(".", "-")
    result = cli("submit", str(spec_file(tmp_path, name, **sections)))
    assert result.exit_code == 1
    assert "(422)" in result.output and f"  {field}" in result.output, result.output
    # Nothing recorded, so the reconciler (which submits earlier tests' jobs meanwhile)
    # has nothing of it to send to Ray; and nothing of that name reached the backend.
    admin = {"Authorization": f"Bearer {(service.home / 'admin-token').read_text().strip()}"}
    page = httpx.get(f"{service.url}/v1/jobs", params={"name": name}, headers=admin).json()
    assert page["items"] == [] and name not in service.backend.names


def test_unreachable_service(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{free_ports(1)[0]}"  # nothing listens there
    monkeypatch.setenv("NUMTUNE_URL", url)
    result = cli("list")
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"numtune: cannot reach numtune at {url} — is `numtune up` running?"
    )


def test_url_from_state_file(cli: Any, service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NUMTUNE_URL")
    state = service.home / "run" / "state.json"
    state.parent.mkdir(exist_ok=True)
    state.write_text(json.dumps({"api_url": service.url}))
    try:
        assert cli("list").exit_code == 0
    finally:
        state.unlink()


def test_tokens_and_owners(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    created = cli("token", "create", "--owner", "alice", "--scope", "submit", "--name", "ci")
    assert created.exit_code == 0, created.output
    secret = created.output.strip().splitlines()[-1]
    token_id = re.search(r"token (\w+) for alice", created.output)
    assert token_id and secret.startswith("nt_")
    assert token_id.group(1) in cli("token", "list").output
    admin_view = cli("list", "--limit", "200").output
    monkeypatch.setenv("NUMTUNE_TOKEN", secret)
    job_id = submitted_id(cli("submit", str(spec_file(tmp_path, "alices"))))
    mine = cli("list").output
    assert job_id in mine and not (set(JOB_ID.findall(admin_view)) & set(JOB_ID.findall(mine)))
    denied = cli("token", "list")
    assert denied.exit_code == 1 and "forbidden (403)" in denied.output
    monkeypatch.delenv("NUMTUNE_TOKEN")
    assert cli("token", "revoke", token_id.group(1)).exit_code == 0
    monkeypatch.setenv("NUMTUNE_TOKEN", secret)
    revoked = cli("list")
    assert revoked.exit_code == 1 and "unauthorized (401)" in revoked.output


def test_bad_token(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMTUNE_TOKEN", "nt_not-a-real-token")
    result = cli("status", "job-0000000000000000")
    assert result.exit_code == 1
    assert "unauthorized (401): unknown or revoked token — set NUMTUNE_TOKEN" in result.output


def test_api_and_up_refuse_insecure_settings(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NUMTUNE_HOME", str(tmp_path))
    exposed = cli("api", "--host", "0.0.0.0", "--dev")
    assert exposed.exit_code == 2
    assert exposed.output.strip() == (
        "numtune: refusing to start: --dev binds to 127.0.0.1 only, not 0.0.0.0"
    )
    no_token = cli("up")
    assert no_token.exit_code == 2 and "no admin token" in no_token.output
    assert not (tmp_path / "run").exists()  # nothing was started
    monkeypatch.setenv("NUMTUNE_PORT", "not-a-port")
    bad_env = cli("api", "--dev")
    assert bad_env.exit_code == 2 and "NUMTUNE_PORT" in bad_env.output


def test_pause_and_resume(cli: Any, service: Service, tmp_path: Path) -> None:
    job_id = submitted_id(cli("submit", str(spec_file(tmp_path, "to-pause"))))
    wait_status(cli, job_id, "running")
    asked = cli("pause", job_id)
    assert asked.exit_code == 0 and f"{job_id} pausing (at its next step)" in asked.output
    early = cli("resume", job_id)
    assert early.exit_code == 1 and "conflict (409)" in early.output and "pausing" in early.output
    # The run stops at its next step: what `jobs.train.runner` writes then, and Ray's end.
    files = RunFiles.for_job(job_id, service.backend.storage)
    files.write_text("result.json", json.dumps({"status": "paused", "metrics": {"step": 2}}))
    service.backend.states[job_id] = "SUCCEEDED"
    wait_status(cli, job_id, "paused")
    assert cli("pause", job_id).output.strip() == f"{job_id} paused"  # idempotent
    resumed = cli("resume", job_id)
    assert resumed.exit_code == 0 and f"{job_id} queued" in resumed.output
    wait_status(cli, job_id, "running")  # as a new Ray submission
    assert service.backend.states[f"{job_id}-p1"] == "RUNNING"
