"""What every task produces: prompt/answer pairs, with an image for image tasks."""

from __future__ import annotations

from dataclasses import dataclass, field


class DataError(ValueError):
    """A dataset cannot be read or generated as asked (the message names file and line)."""


@dataclass(frozen=True)
class Example:
    prompt: str
    answer: str
    # Image tasks: the picture the question is about, as encoded bytes (generated tasks) or
    # a local file path (JSONL rows); jobs/modeling/vision.py reads either.
    image: bytes | str | None = field(default=None, repr=False)

    def as_row(self) -> dict[str, str]:
        return {"prompt": self.prompt, "answer": self.answer}


@dataclass(frozen=True)
class TaskData:
    task: str
    train: list[Example]
    eval: list[Example]
    # data.validation_size: the training rows held out of training, scored at the end under
    # every decoding (a study picks each arm's decoding on them, never on `eval`).
    validation: list[Example] = field(default_factory=list)
