"""Issue 18's "Must show", real everything: the unmodified `openai` client against the
control plane uploads a file, fine-tunes a tiny model with a numeric loss (extra_body),
reads the per-step metrics as events, lists the checkpoints, and the serving side answers
a completion with the fine-tuned model."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import openai
import pytest

from tests.e2e.conftest import Numtune

pytestmark = [pytest.mark.ray, pytest.mark.slow]
TERMINAL = {"succeeded", "failed", "cancelled"}


def training_rows(n: int) -> str:
    """Half numtune rows, half OpenAI chat rows: both formats in one file."""
    rng = random.Random(0)
    lines = []
    for i in range(n):
        a, b = rng.randrange(50), rng.randrange(50)
        question, answer = f"What is {a} + {b}?", str(a + b)
        row = (
            {"prompt": question, "answer": answer}
            if i % 2
            else {
                "messages": [
                    {"role": "user", "content": question},
                    {"role": "assistant", "content": answer},
                ]
            }
        )
        lines.append(json.dumps(row))
    return "\n".join(lines) + "\n"


def test_openai_client_fine_tunes_and_the_result_is_served(
    shared_numtune: Numtune, tmp_path: Path
) -> None:
    numtune = shared_numtune
    token = (numtune.home / "admin-token").read_text().strip()
    api = openai.OpenAI(base_url=f"{numtune.url}/v1", api_key=token, max_retries=0)
    data = tmp_path / "sums.jsonl"
    data.write_text(training_rows(48))
    with data.open("rb") as f:
        uploaded = api.files.create(file=f, purpose="fine-tune")
    assert uploaded.id.startswith("file-") and uploaded.bytes == data.stat().st_size

    job = api.fine_tuning.jobs.create(
        model="random:tiny-digit",
        training_file=uploaded.id,
        hyperparameters={"n_epochs": 1, "batch_size": 8, "learning_rate_multiplier": 30},
        suffix="sums",
        seed=0,
        extra_body={"numeric_loss": {"name": "smmd", "weight": 0.3, "bandwidth": 2.0}},
    )
    assert job.status == "queued" and job.model == "random:tiny-digit"
    # A queued or running job's file cannot be deleted from under it.
    with pytest.raises(openai.ConflictError):
        api.files.delete(uploaded.id)

    deadline = time.monotonic() + 300
    while (job := api.fine_tuning.jobs.retrieve(job.id)).status not in TERMINAL or (
        job.status == "succeeded" and job.fine_tuned_model is None  # registered just after
    ):
        assert time.monotonic() < deadline, job
        time.sleep(1)
    assert job.status == "succeeded", job.error
    assert (job.fine_tuned_model or "").startswith("ft-sums-")  # name:version

    # Iterating the page follows `after` through every page, as the client does.
    events = list(api.fine_tuning.jobs.list_events(job.id, limit=4))
    steps = [e for e in events if e.type == "metrics"]
    assert len(steps) >= 5, events  # 44 training rows at batch 8: 6 steps, one event each
    assert {"loss", "ce"} <= set(steps[0].data or {}), steps[0]
    assert [e.message for e in events if e.type == "message"][:2] == [
        f"Registered as {job.fine_tuned_model}",
        "The job has successfully completed",
    ]
    checkpoints = api.fine_tuning.jobs.checkpoints.list(job.id).data
    assert checkpoints and checkpoints[0].fine_tuned_model_checkpoint == job.fine_tuned_model
    assert checkpoints[0].step_number == steps[0].data["step"]  # type: ignore[index]

    served = openai.OpenAI(base_url=f"{numtune.serve_url}/v1", api_key=token, max_retries=0)
    completion = served.completions.create(
        model=job.fine_tuned_model, prompt="What is 12 + 30?", max_tokens=6, temperature=0
    )
    assert isinstance(completion.choices[0].text, str) and completion.usage is not None
    assert api.files.delete(uploaded.id).deleted  # the job has ended: its file may go
