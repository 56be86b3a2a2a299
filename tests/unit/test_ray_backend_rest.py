"""service/backends/ray_backend.py over Ray's Jobs REST API, told apart by status code (issue 46
item 4): a job Ray does not know is RayJobMissingError (404), a submission id Ray already
has is followed, not an error (400, then the job found), a stop of an unknown job is a
no-op, anything else Ray refuses is RayUnreachableError. The real backend talks HTTP to a
loopback stand-in answering as Ray 2.60's dashboard does (tests/support/ray_jobs_stub.py);
tests/integration/test_ray_fault.py runs it against a real Ray head."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.backends.ray_backend import (
    RayJobInfo,
    RayJobMissingError,
    RayJobsBackend,
    RayUnreachableError,
    ray_token,
)
from service.queue.admission import Capacity, Resources
from tests.support.ray_jobs_stub import RayJobsState, ray_jobs_api

TOKEN = "ray-token-for-tests"
Ray = tuple[RayJobsBackend, RayJobsState]


@pytest.fixture
def ray(tmp_path: Path) -> Iterator[Ray]:
    with ray_jobs_api(TOKEN) as (address, state):
        env = {"NUMTUNE_MLFLOW_URI": "file:///x"}
        yield RayJobsBackend(address, str(tmp_path), "/py", token=TOKEN, env=env), state


def test_submit_sends_the_job_and_a_repeated_submission_follows_it(ray: Ray) -> None:
    backend, state = ray
    backend.submit("job-1", "run", '{"name": "j"}')
    sent = state.jobs["job-1"]
    assert sent["entrypoint"].startswith("/py -m jobs run ")
    assert "--job-id job-1" in sent["entrypoint"]
    assert sent["entrypoint_num_cpus"] == 0 and sent["metadata"] == {"numtune_kind": "run"}
    assert sent["runtime_env"] == {"env_vars": {"NUMTUNE_MLFLOW_URI": "file:///x"}}
    # After a crash the reconciler submits the same id again: Ray's 400, then the job found.
    backend.submit("job-1", "run", '{"name": "j"}')
    assert [(m, p) for m, p, _ in state.requests[-2:]] == [
        ("POST", "/api/jobs/"),
        ("GET", "/api/jobs/job-1"),
    ]
    assert backend.info("job-1") == RayJobInfo("PENDING", None)


def test_a_refused_submission_of_a_job_ray_lacks_is_an_error(ray: Ray) -> None:
    backend, state = ray
    state.invalid = True
    with pytest.raises(RayUnreachableError, match="HTTP 400"):
        backend.submit("job-2", "run", "{}")
    assert "job-2" not in state.jobs


def test_an_unknown_job_is_missing_and_stopping_it_does_nothing(ray: Ray) -> None:
    backend = ray[0]
    with pytest.raises(RayJobMissingError):
        backend.info("gone")
    backend.stop("gone")  # 404: nothing to stop
    with pytest.raises(RayUnreachableError, match="HTTP 404"):
        backend.logs("gone")  # the copier keeps what it has


def test_logs_stop_ping_and_capacity_read_rays_answers(ray: Ray) -> None:
    backend, state = ray
    backend.submit("job-3", "tune", "{}")
    assert "--tune-id job-3" in state.jobs["job-3"]["entrypoint"]
    state.logs["job-3"] = "step 1\n"
    assert backend.logs("job-3") == "step 1\n"
    backend.stop("job-3")
    assert backend.info("job-3").status == "STOPPED"
    backend.ping()
    assert backend.capacity() is None  # the monitor has not reported yet
    state.usage = {"CPU": [1.5, 4.0], "GPU": [0.0, 1.0]}
    assert backend.capacity() == Capacity(Resources(4.0, 1.0), Resources(2.5, 1.0))


def test_a_wrong_token_or_no_head_is_unreachable(ray: Ray, tmp_path: Path) -> None:
    backend = ray[0]
    wrong = RayJobsBackend(backend.address, str(tmp_path), "/py", token="not-it")
    with pytest.raises(RayUnreachableError, match="HTTP 401: Authentication required"):
        wrong.info("job-1")
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{free.getsockname()[1]}"
    down = RayJobsBackend(closed, str(tmp_path), "/py", token=TOKEN)
    for call in (down.ping, down.capacity, lambda: down.info("job-1")):
        with pytest.raises(RayUnreachableError, match="Ray at"):
            call()


def test_the_token_is_found_where_rays_own_clients_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("from-the-default-file\n")
    assert ray_token() is None  # token auth off: Ray's clients send none either
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # as ray.init sets it for its own cluster
    assert ray_token() == "from-the-default-file"
    (tmp_path / "named").write_text("from-the-named-file")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "named"))
    assert ray_token() == "from-the-named-file"
    monkeypatch.setenv("RAY_AUTH_TOKEN", "from-the-environment")
    assert ray_token() == "from-the-environment"
