"""Where a run's files live: a local folder or any pyarrow filesystem URI (s3://, gs://).

A run owns `<storage_root>/runs/<job_id>/`: Ray Train's checkpoints (under `train/`) and
the files the control plane reads, each with its record in `jobs/records/models.py`. Nothing here
imports Ray or the service.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow.fs as pafs

from jobs.records.models import (
    DECODINGS,
    METRICS,
    PREDICTIONS,
    RESULT,
    TRIALS,
    DecodingsRecord,
    MetricsRow,
    QuestionRecord,
    RunResult,
    TrialRow,
)
from jobs.stats import RunOutcome
from jobs.storage.paths import storage_root
from jobs.storage.uri import join_uri

R = TypeVar("R", bound=RunResult)

JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def complete_lines(text: str) -> list[str]:
    """The lines that end in a newline: the file may be appended to while we read it."""
    return text[: text.rfind("\n") + 1].splitlines()


def metrics_text(rows: list[MetricsRow]) -> str:
    return "".join(json.dumps(row.as_dict(), sort_keys=True) + "\n" for row in rows)


@dataclass(frozen=True)
class RunFiles:
    """The files of one run, on whichever filesystem the storage root names."""

    fs: pafs.FileSystem
    root: str  # path inside `fs` of runs/<job_id>
    uri: str  # the same, as the user-facing URI or local path

    @classmethod
    def for_job(cls, job_id: str, storage: str | None = None) -> RunFiles:
        if not JOB_ID.match(job_id) or ".." in job_id:
            raise ValueError(f"job id {job_id!r}: use letters, digits, '.', '_' and '-' only")
        base = storage or storage_root()
        fs, path = pafs.FileSystem.from_uri(base if "://" in base else os.path.abspath(base))
        root = f"{path.rstrip('/')}/runs/{job_id}"
        fs.create_dir(root, recursive=True)
        # A URI may carry options (s3://b/p?endpoint_override=...): the path goes before them.
        return cls(fs, root, join_uri(base, "runs", job_id))

    @classmethod
    def at(cls, uri: str) -> RunFiles:
        """The run folder a `uri` (from `.uri`) names, e.g. in a worker on another node."""
        location, _, _ = uri.partition("?")
        fs, path = pafs.FileSystem.from_uri(uri if "://" in location else os.path.abspath(uri))
        return cls(fs, path.rstrip("/"), uri)

    def to_uri(self, fs_path: str) -> str:
        """A path inside this run's filesystem (what Ray hands back) as a user-facing URI."""
        location, sep, options = self.uri.partition("?")
        scheme, found, _ = location.partition("://")
        return f"{scheme}://{fs_path.lstrip('/')}{sep}{options}" if found else fs_path

    def sub_uri(self, *parts: str) -> str:
        """The URI of a path below this run (what Ray Train and Tune take as storage)."""
        return join_uri(self.uri, *parts)

    def write_text(self, name: str, text: str) -> None:
        # Write to a temporary name then move, so readers never see half a file.
        tmp = f"{self.root}/.{name}.tmp"
        with self.fs.open_output_stream(tmp) as out:
            out.write(text.encode("utf-8"))
        self.fs.move(tmp, f"{self.root}/{name}")

    def append_text(self, name: str, text: str) -> None:
        """Add `text` at the end of the file (created if missing). Readers may see a last
        line half written, so they take only lines that end in a newline."""
        path = f"{self.root}/{name}"
        try:
            with self.fs.open_append_stream(path) as out:
                out.write(text.encode("utf-8"))
        except NotImplementedError:
            # Object stores cannot append: there the file is written whole again.
            self.write_text(name, (self.read_text(name) or "") + text)

    def read_text(self, name: str) -> str | None:
        path = f"{self.root}/{name}"
        if self.fs.get_file_info(path).type == pafs.FileType.NotFound:
            return None
        with self.fs.open_input_stream(path) as inp:
            return bytes(inp.readall()).decode("utf-8")

    def write_json(self, name: str, obj: Any) -> None:
        self.write_text(name, json.dumps(obj, indent=2, sort_keys=True) + "\n")

    def read_json(self, name: str) -> Any:
        text = self.read_text(name)
        return None if text is None else json.loads(text)

    def write_result(self, result: RunResult) -> None:
        # Python mode: a NaN metric is written as json.dumps writes it, not turned into null.
        self.write_json(RESULT, result.model_dump())

    def read_result(self, model: type[R]) -> R | None:
        """The run's `result.json` as `model` (RunResult or TuneResult); None before it
        ends. Raises pydantic's ValidationError for a file that is not one."""
        found = self.read_json(RESULT)
        return None if found is None else model.model_validate(found)

    def append_metrics(self, rows: list[MetricsRow]) -> None:
        """Add rows at the end of metrics.jsonl in one write."""
        self.append_text(METRICS, metrics_text(rows))

    def write_metrics(self, rows: list[MetricsRow]) -> None:
        """Replace metrics.jsonl with `rows` (only while no run writes it)."""
        self.write_text(METRICS, metrics_text(rows))

    def read_metrics(self) -> list[MetricsRow]:
        """The rows written so far (a line still being appended is left for later)."""
        lines = complete_lines(self.read_text(METRICS) or "")
        return [MetricsRow.model_validate(json.loads(line)) for line in lines if line.strip()]

    def write_predictions(self, records: list[QuestionRecord], name: str = PREDICTIONS) -> None:
        """predictions.jsonl, whole: one judged answer per line, in the evaluation's order."""
        self.write_text(name, "".join(r.model_dump_json() + "\n" for r in records))

    def read_predictions(self, name: str = PREDICTIONS) -> list[QuestionRecord] | None:
        """The final evaluation's answers; None when the run wrote none (sweeps, older
        runs, a run that ended before it)."""
        text = self.read_text(name)
        if text is None:
            return None
        return [QuestionRecord.model_validate_json(line) for line in text.splitlines() if line]

    def write_decodings(self, record: DecodingsRecord) -> None:
        # Python mode, as result.json: an undefined metric (NaN) is kept, not turned into null.
        self.write_json(DECODINGS, record.model_dump())

    def read_decodings(self) -> DecodingsRecord | None:
        """decodings.json: the final evaluation under each decoding; None when the run
        wrote none (sweeps, older runs, one that ended before it)."""
        found = self.read_json(DECODINGS)
        return None if found is None else DecodingsRecord.model_validate(found)

    def read_outcome(
        self, seed: int, run_id: str | None = None, decoding: str | None = None
    ) -> RunOutcome | None:
        """A succeeded run as jobs.stats compares it: its final evaluation's metrics (the
        `eval_` prefix dropped) and answers; None before it ends or when it failed.
        `decoding`: under that decoding (decodings.json), None when the run did not score
        it; its other metrics (e.g. the calibrated interval's) as the run reported them."""
        result = self.read_result(RunResult)
        if result is None or result.status != "succeeded":
            return None
        if decoding is not None:
            return self._decoded_outcome(seed, run_id, decoding, result)
        metrics: dict[str, float | None] = {
            key.removeprefix("eval_"): float(value) if math.isfinite(value) else None
            for key, value in result.metrics.items()
            if key.startswith("eval_") and isinstance(value, int | float)
        }  # NaN (MAE with nothing parsed): undefined
        questions = self.read_predictions() or []
        return RunOutcome(seed=seed, run_id=run_id, metrics=metrics, questions=questions)

    def _decoded_outcome(
        self, seed: int, run_id: str | None, decoding: str, result: RunResult
    ) -> RunOutcome | None:
        record = result.decodings or self.read_decodings()
        scored = None if record is None else record.scores.get(decoding)
        if scored is None:
            return None
        reported = {  # what the decoding does not change: the figures not scored per decoding
            k.removeprefix("eval_"): v
            for k, v in result.metrics.items()
            if k.startswith("eval_") and k.removeprefix("eval_") not in scored.metrics
        }
        metrics: dict[str, float | None] = {
            key: float(value) if math.isfinite(value) else None
            for key, value in (reported | scored.metrics).items()
            if isinstance(value, int | float)
        }
        questions = self.read_predictions(scored.predictions) or []
        return RunOutcome(seed=seed, run_id=run_id, metrics=metrics, questions=questions)

    def has(self, name: str) -> bool:
        return self.fs.get_file_info(f"{self.root}/{name}").type != pafs.FileType.NotFound

    def write_trials(self, rows: list[TrialRow]) -> None:
        self.write_json(TRIALS, [row.model_dump() for row in rows])

    def read_trials(self) -> list[TrialRow] | None:
        rows = self.read_json(TRIALS)
        return None if rows is None else [TrialRow.model_validate(row) for row in rows]
