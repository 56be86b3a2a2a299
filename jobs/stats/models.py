"""The typed inputs and results of a comparison of arms against a baseline.

Inputs: one `RunOutcome` per (arm, seed) with the run's summary metrics and, when the run
kept them, its per-question records. Results: per arm a `PrimaryTest` against the baseline
(paired t over seeds, bootstrap over questions × seeds, Holm, TOST) and `SecondaryTest`s
(Benjamini–Hochberg), with a verdict sentence. Undefined numbers are None, never NaN, so
every result serialises to plain JSON.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# The metrics numtune's evaluation reports where a smaller value is the better one (with a
# calibrated 90 % interval's relative width and interval score, as a study reports them).
LOWER_IS_BETTER = frozenset(
    {"mae", "median_rel_error", "parse_failure_rate", "interval_width_90", "interval_score_90"}
)


def higher_is_better(metric: str) -> bool:
    return metric not in LOWER_IS_BETTER


class QuestionRecord(BaseModel):
    """One held-out question as a run answered it (the order is the evaluation set's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt: str | None = None
    target: str = Field(description="the reference answer's text")
    prediction: str = Field(description="the generated answer's text")
    value: float | None = Field(description="the number parsed from the prediction")
    target_value: float | None = Field(
        description="the number parsed from the target; None: a text answer, compared as text"
    )
    correct: bool = Field(description="exact match, as the run's exact_match counts it")
    abs_error: float | None = Field(
        description="|value − target_value| (clock tasks: minutes off); None when unparsed"
    )
    digit_accuracy: float | None = Field(
        None, description="share of digit places right (text answers: 1 if exact, else 0)"
    )


class RunOutcome(BaseModel):
    """One finished run of one arm: its seed, summary metrics and per-question records."""

    model_config = ConfigDict(extra="forbid")

    seed: int
    run_id: str | None = None
    metrics: dict[str, float | None]
    questions: list[QuestionRecord] = Field(default_factory=list)


class Interval(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    low: float
    high: float


class MetricTest(BaseModel):
    """One metric of one arm against the baseline, paired by seed."""

    model_config = ConfigDict(extra="forbid")

    metric: str
    higher_is_better: bool
    seeds: list[int] = Field(description="the seeds both arms have (the pairs tested)")
    unpaired_seeds: list[int] = Field(description="seeds only one of the two arms has")
    n: int = Field(description="number of pairs")
    diff: float | None = Field(description="mean over pairs of arm − baseline")
    ci: Interval | None = Field(description="confidence interval of diff (paired t)")
    t: float | None
    p: float | None = Field(description="two-sided paired t-test over seeds")
    d_z: float | None = Field(description="effect size: diff / sd of the differences")
    wins: int = Field(description="pairs where the arm is better")
    losses: int = Field(description="pairs where the arm is worse")
    ties: int
    ci_boot: Interval | None = Field(description="bootstrap CI over questions × seeds")
    p_boot: float | None = Field(description="two-sided bootstrap p of diff = 0")
    boot_seeds: int = Field(description="pairs with per-question records in the bootstrap")
    notes: list[str] = Field(default_factory=list, description="why a figure is absent")


class PrimaryTest(MetricTest):
    p_holm: float | None = Field(description="Holm-adjusted p over every primary test")
    margin: float
    p_tost: float | None = Field(description="TOST p for |diff| < margin")
    equivalent: bool | None = Field(description="shown within ±margin; None: no test")


class SecondaryTest(MetricTest):
    p_bh: float | None = Field(description="Benjamini–Hochberg over every secondary test")


class RunSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seed: int
    run_id: str | None
    metrics: dict[str, float | None]


class ArmResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    arm: str
    runs: list[RunSummary]
    mean: dict[str, float | None] = Field(description="per metric, mean over runs")
    vs_ce: PrimaryTest | None = Field(description="the primary test; None for the baseline")
    secondary: list[SecondaryTest] = Field(default_factory=list)
    verdict: str


class Comparison(BaseModel):
    model_config = ConfigDict(extra="forbid")

    baseline: str
    primary: str
    secondary: list[str]
    alpha: float
    margin: float
    n_boot: int
    seed: int
    family_size: int = Field(description="primary tests with a p (Holm's m)")
    secondary_family_size: int = Field(description="secondary tests with a p (BH's m)")
    arms: list[ArmResult] = Field(description="the baseline first, then the arms in order")
