"""What every task produces: prompt/answer pairs."""

from __future__ import annotations

from dataclasses import dataclass


class DataError(ValueError):
    """A dataset cannot be read or generated as asked (the message names file and line)."""


@dataclass(frozen=True)
class Example:
    prompt: str
    answer: str

    def as_row(self) -> dict[str, str]:
        return {"prompt": self.prompt, "answer": self.answer}


@dataclass(frozen=True)
class TaskData:
    task: str
    train: list[Example]
    eval: list[Example]
