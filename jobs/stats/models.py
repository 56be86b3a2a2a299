"""The typed inputs and results of a comparison of arms against a baseline.

Inputs: one `RunOutcome` per (arm, seed) with the run's summary metrics and, when the run
kept them, its per-question records. Results: per arm a `PrimaryTest` per primary metric against
the baseline (paired t over seeds, bootstrap over questions × seeds, Holm over every primary
metric × arm, TOST Holm-corrected over the same family), `SecondaryTest`s (Benjamini–Hochberg
over the declared secondary family) and exploratory tests (raw p, no correction), with a
verdict sentence that also says what it rests on (`Footing`). Undefined numbers are None,
never NaN, so every result serialises to plain JSON.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# The metrics numtune's evaluation reports where a smaller value is the better one (with a
# calibrated 90 % interval's relative width and interval score, and the samples' CRPS, as a
# study reports them; jobs/infer/scores.py defines the per-question ones).
LOWER_IS_BETTER = frozenset(
    {
        "mae",
        "median_rel_error",
        "log_error",
        "parse_failure_rate",
        "interval_width_90",
        "interval_score_90",
        "crps",
    }
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
    # The scores of jobs/infer/scores.py; None where undefined or in records from before them.
    log_error: float | None = Field(None, description="log10(1 + abs_error)")
    # From the run's end-of-job calibration, on the questions it calibrated on (the first
    # `calibration.questions` of the evaluation set); None elsewhere.
    samples: list[float] | None = Field(None, description="the K sampled answers' numbers")
    interval_90: tuple[float, float] | None = Field(
        None, description="the calibrated 90 % interval, fitted without this question"
    )
    interval_score_90: float | None = Field(None, description="its Winkler score, α = 0.1")
    crps: float | None = Field(None, description="the samples' CRPS at the answer")


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
    margin: float | None = Field(description="the equivalence margin; None: no TOST declared")
    p_tost: float | None = Field(description="TOST p for |diff| < margin")
    p_tost_holm: float | None = Field(
        None, description="TOST p Holm-adjusted over every primary test's TOST (the family)"
    )
    equivalent: bool | None = Field(
        description="shown within ±margin after Holm over the family's TOST p; None: no test"
    )


class Footing(BaseModel):
    """What a verdict rests on besides the tests: the budget the runs trained for, whether
    `ce` had its learning rate tuned with the arms' sweep budget, and whether `ce` was still
    improving at the end of it. "Recommended" needs both conditions."""

    model_config = ConfigDict(extra="forbid")

    steps: int | None = Field(None, description="training steps every run took (the budget)")
    baseline_tuned: bool = Field(
        False, description="ce's learning rate swept with the same budget (tune_lr)"
    )
    baseline_rising: bool | None = Field(
        None, description="ce's mean primary metric still improving at the end; None: unknown"
    )
    rising_detail: str | None = Field(None, description="the curve figures behind it")


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
    vs_ce: PrimaryTest | None = Field(
        description="the (first) primary metric's test; None for the baseline"
    )
    primary_tests: list[PrimaryTest] = Field(
        default_factory=list, description="every primary metric's test, in the spec's order"
    )
    secondary: list[SecondaryTest] = Field(default_factory=list)
    exploratory: list[MetricTest] = Field(
        default_factory=list, description="outside any correction: raw p only"
    )
    verdict: str


class Comparison(BaseModel):
    model_config = ConfigDict(extra="forbid")

    baseline: str
    primary: str = Field(description="the first primary metric")
    primaries: list[str] = Field(default_factory=list, description="every primary metric")
    secondary: list[str]
    exploratory: list[str] = Field(default_factory=list)
    alpha: float
    margin: float | None = Field(description="the first primary's equivalence margin")
    margins: dict[str, float] = Field(default_factory=dict, description="per primary metric")
    footing: Footing | None = None
    n_boot: int
    seed: int
    family_size: int = Field(description="primary tests with a p (Holm's m): metrics × arms")
    secondary_family_size: int = Field(description="secondary tests with a p (BH's m)")
    arms: list[ArmResult] = Field(description="the baseline first, then the arms in order")
