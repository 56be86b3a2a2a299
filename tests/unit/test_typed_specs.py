"""The store hands back typed specs: a tune row's spec is a TuneSpec, a job row's a JobSpec,
and the job spec of a tune is its base; parsed once per row, kept from the spec a row was
made from, and the stored JSON is what the API shows and Ray is handed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.spec import JobSpec, StudySpec, TuneSpec
from service.jobs.schemas import JobOut
from service.store import Database, JobStore, StudyStore, UnreadableSpecError, migrate

JOB = JobSpec.model_validate({"name": "j", "model": {"source": "random:tiny-digit"}})
TUNE = TuneSpec.model_validate(
    {
        "name": "t",
        "base": {
            "name": "b",
            "register_as": "best",
            "model": {"source": "random:tiny-digit"},
            "train": {"steps": 20, "eval_every": 10},
        },
        "space": {"bandwidth": {"kind": "loguniform", "low": 0.1, "high": 2.0}},
    }
)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'numtune.db'}")
    migrate(database.engine)
    yield database
    database.dispose()


def test_rows_read_back_give_the_spec_of_their_kind(db: Database) -> None:
    store = JobStore(db)
    job, _ = store.create(kind="job", name="j", owner="ann", spec=JOB)
    tune, _ = store.create(kind="tune", name="t", owner="ann", spec=TUNE)

    job_row, tune_row = store.get(job.id), store.get(tune.id)
    assert job_row is not None and tune_row is not None
    assert isinstance(job_row.spec, JobSpec) and job_row.spec == JOB
    assert job_row.job_spec is job_row.spec
    assert isinstance(tune_row.spec, TuneSpec) and tune_row.spec == TUNE
    assert tune_row.job_spec == TUNE.base and tune_row.job_spec.register_as == "best"
    listed, _ = store.page(kind="tune", owner="ann")
    assert [type(r.spec) for r in listed] == [TuneSpec]


def test_a_spec_is_parsed_once_per_row_and_not_again_for_the_row_it_made(db: Database) -> None:
    store = JobStore(db)
    made, _ = store.create(kind="job", name="j", owner="ann", spec=JOB)
    assert made.spec is JOB  # the spec it was made from: no second validation
    assert made.spec_json == JOB.model_dump(mode="json")
    read = store.get(made.id)
    assert read is not None
    assert read.spec is read.spec  # parsed on first use, then kept


def test_the_stored_json_is_what_the_api_shows(db: Database) -> None:
    row, _ = JobStore(db).create(kind="tune", name="t", owner="ann", spec=TUNE)
    assert JobOut.of(row).spec == TUNE.model_dump(mode="json") == row.spec_json


def test_a_spec_that_no_longer_validates_says_so_when_read(db: Database) -> None:
    store = JobStore(db)
    row, _ = store.create(kind="job", name="old", owner="ann", spec={"name": "old", "gone": 1})
    read = store.get(row.id)
    assert read is not None and read.spec_json["gone"] == 1
    with pytest.raises(UnreadableSpecError, match=row.id):
        _ = read.spec
    assert JobOut.of(read).spec == {"name": "old", "gone": 1}  # still listed as stored


def test_a_row_refuses_a_spec_of_the_other_kind(db: Database) -> None:
    with pytest.raises(ValueError, match="not the spec of a job"):
        JobStore(db).create(kind="job", name="t", owner="ann", spec=TUNE)


def test_a_study_row_gives_its_study_spec(db: Database) -> None:
    spec = StudySpec.model_validate(
        {"name": "s", "base": JOB.model_dump(mode="json"), "arms": [{"name": "smmd"}]}
    )
    store = StudyStore(db)
    made, _ = store.create(name="s", owner="ann", spec=spec, jobs=[])
    assert made.spec is spec
    read = store.get(made.id)
    assert read is not None and isinstance(read.spec, StudySpec) and read.spec == spec
