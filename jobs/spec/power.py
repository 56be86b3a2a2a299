"""A study's `power`: the spread of paired differences its plan rests on, declared before
any run (or named: an earlier study of the same owner on the same task), and the effect it
is meant to settle. jobs/stats/power.py does the arithmetic; the service plans with it."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from jobs.spec.base import Strict


class StudyPower(Strict):
    """`power: {seed_sd, question_sd, target_effect}` or `{from_study, target_effect}`."""

    seed_sd: float | None = Field(
        None,
        ge=0,
        description=(
            "SD between seeds of the per-seed paired difference arm − ce beyond question "
            "sampling (primary metric's units)"
        ),
    )
    question_sd: float | None = Field(
        None,
        ge=0,
        description="SD of the paired difference on one question (≈ 0.3–0.6 for exact match)",
    )
    from_study: str | None = Field(
        None,
        min_length=1,
        max_length=40,
        description="an earlier study of yours on the same task: its runs' answers give the spread",
    )
    target_effect: float | None = Field(
        None,
        gt=0,
        description="the smallest difference worth detecting; the plan gives the seeds and "
        "questions it needs (default: the equivalence margin)",
    )

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        declared = (self.seed_sd is not None, self.question_sd is not None)
        if any(declared) and not all(declared):
            missing = "question_sd" if self.question_sd is None else "seed_sd"
            raise ValueError(f"{missing}: a declared spread names both seed_sd and question_sd")
        if all(declared) and self.from_study is not None:
            raise ValueError("from_study: declare a spread or name a study, not both")
        if all(declared) and self.seed_sd == 0 and self.question_sd == 0:
            raise ValueError("seed_sd and question_sd are both 0: no spread to plan with")
        return self

    @property
    def declared(self) -> bool:
        return self.seed_sd is not None and self.question_sd is not None
