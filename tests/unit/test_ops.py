"""The use cases (each feature's use_cases.py) where they hold logic of their own, called
without HTTP: an OpenAI create validates its JobSpec once and writes it once; the learning-rate
multiplier is shown as asked; listing scopes rows to the caller and names the caller's
own cursor field; cancelling maps each way it can fail to the API's error."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.spec import JobSpec
from service.app import create_app
from service.backends.ray_backend import RayUnreachableError
from service.errors import APIError, Conflict, Forbidden, InvalidRequest, NotFound, RayUnavailable
from service.files import use_cases as uploads
from service.fine_tuning import use_cases as fine_tuning
from service.fine_tuning.schemas import FineTuningJobCreate
from service.jobs import cancel as cancelling
from service.jobs import use_cases as ops
from service.jobs.submit import Submission
from service.services import Services
from service.settings import Settings
from service.store import JobRow, Principal
from service.studies import use_cases as studies
from tests.support.api import ADMIN
from tests.support.files import GOOD_ROWS
from tests.support.stub_backend import StubBackend

ANN = Principal("ann", frozenset({"read", "submit"}), "t-ann")
BOB = Principal("bob", frozenset({"read", "submit"}), "t-bob")
ROOT = Principal("admin", frozenset({"read", "submit", "admin"}), "t-admin")
TINY = {"source": "random:tiny-digit"}


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    settings = Settings(home=tmp_path, admin_token=ADMIN)
    with TestClient(create_app(settings, backend=StubBackend(), reconcile=False)) as client:
        yield client.app.state.services  # type: ignore[attr-defined]


def submission(s: Services) -> Submission:
    return Submission(s.settings, s.registry, s.files, s.uploads, s.jobs)


def uploaded(s: Services, who: Principal) -> str:
    rows = io.BytesIO((GOOD_ROWS * 2).encode())  # 16 rows: one held out leaves two batches
    out = uploads.receive(s.files, s.uploads, 10**9, who, ("rows.jsonl", rows), "fine-tune")
    return out.id


def body(file_id: str, **more: Any) -> FineTuningJobCreate:
    return FineTuningJobCreate.model_validate(
        {"model": "random:tiny-digit", "training_file": file_id, **more}
    )


class Counting:
    """Wraps a pydantic validator, counting what it validates."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, 0

    def validate_python(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.inner.validate_python(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_an_openai_create_validates_its_job_spec_once_and_writes_it_once(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    ask = body(uploaded(services, ANN), numeric_loss={"name": "smmd", "weight": 0.5})
    validator = Counting(JobSpec.__pydantic_validator__)
    monkeypatch.setattr(JobSpec, "__pydantic_validator__", validator)
    dumps = []
    real_dump = JobSpec.model_dump

    def dump(self: JobSpec, **kwargs: Any) -> dict[str, Any]:
        dumps.append(kwargs)
        return real_dump(self, **kwargs)

    monkeypatch.setattr(JobSpec, "model_dump", dump)
    shown = fine_tuning.create(submission(services), ask, ANN, None)
    assert validator.calls == 1  # at the edge: the create's spec, built from the body
    assert dumps == [{"mode": "json"}]  # the row's JSON, once
    assert shown.numeric_loss["name"] == "smmd" and shown.status == "queued"
    monkeypatch.undo()
    row = services.jobs.get(shown.id)
    assert row is not None and row.spec.loss.weight == 0.5  # read back typed


def test_the_learning_rate_multiplier_is_shown_as_asked(services: Services) -> None:
    file_id = uploaded(services, ANN)
    hyper = {"learning_rate_multiplier": 0.3, "batch_size": 4}
    asked = fine_tuning.create(
        submission(services), body(file_id, hyperparameters=hyper), ANN, None
    )
    assert asked.hyperparameters.learning_rate_multiplier == 0.3
    row = services.jobs.get(asked.id)
    assert row is not None and row.meta is not None
    assert row.meta["learning_rate_multiplier"] == 0.3
    assert row.spec.train.lr == pytest.approx(3e-5)
    auto = fine_tuning.create(submission(services), body(file_id), ANN, None)
    assert auto.hyperparameters.learning_rate_multiplier == 1.0
    # A job posted to /v1/jobs asked for no multiplier: its rate as a multiple of the default.
    plain = JobSpec.model_validate({"name": "plain", "model": TINY, "train": {"lr": 2e-4}})
    row, _ = submission(services).record(plain, "job", ANN, None)
    shown = fine_tuning.get(services.jobs, services.registry, row.id, ANN)
    assert shown.hyperparameters.learning_rate_multiplier == 2.0


def test_listing_scopes_rows_to_the_caller_and_names_its_cursor_field(
    services: Services,
) -> None:
    record = submission(services).record
    mine = record(JobSpec.model_validate({"name": "a", "model": TINY}), "job", ANN, None)[0]
    theirs = record(JobSpec.model_validate({"name": "b", "model": TINY}), "job", BOB, None)[0]
    ids = lambda rows: {r.id for r in rows}  # noqa: E731
    assert ids(ops.listing(services.jobs, ANN, kind="job")[0]) == {mine.id}
    assert ids(ops.listing(services.jobs, ROOT, kind="job")[0]) == {mine.id, theirs.id}
    assert ids(ops.listing(services.jobs, ROOT, kind="job", owner="bob")[0]) == {theirs.id}
    with pytest.raises(Forbidden):
        ops.listing(services.jobs, ANN, kind="job", owner="bob")
    with pytest.raises(NotFound):  # another owner's job reads as missing
        ops.owned(services.jobs, theirs.id, "job", ANN)
    with pytest.raises(NotFound):  # and a job is not a tune
        ops.owned(services.jobs, mine.id, "tune", ANN)
    for field, call in (
        (
            "after",
            lambda: ops.listing(services.jobs, ANN, kind="job", cursor="x", cursor_field="after"),
        ),
        ("cursor", lambda: studies.listing(services.studies, ANN, 10, "x")),
    ):
        with pytest.raises(InvalidRequest) as error:
            call()
        assert [p["field"] for p in error.value.detail] == [field]


class Refusing:
    """A canceller that fails the way it is told to."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def cancel(self, row: JobRow, by: str) -> JobRow:
        raise self.error


def test_cancelling_maps_each_way_it_can_fail_to_the_apis_error(services: Services) -> None:
    spec = JobSpec.model_validate({"name": "c", "model": TINY})
    row, _ = submission(services).record(spec, "job", ANN, None)
    ways: list[tuple[Exception, type[APIError]]] = [
        (cancelling.AlreadyEndedError(row), Conflict),
        (cancelling.CancelContendedError("contended"), Conflict),
        (cancelling.JobGoneError("gone"), NotFound),
        (RayUnreachableError("down"), RayUnavailable),
    ]
    for error, answer in ways:
        with pytest.raises(answer):
            ops.cancel(Refusing(error), row, ANN)  # type: ignore[arg-type]
    canceller = cancelling.Canceller(services.jobs, services.backend, lambda row: None)
    done = ops.cancel(canceller, row, ANN)
    assert (done.status, done.detail) == ("cancelled", "by ann")
