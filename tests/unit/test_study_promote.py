"""Which arm a study promotes: only one significantly better than ce after Holm, in the
metric's better direction; the best such difference when several are."""

from __future__ import annotations

from typing import Any

from jobs.spec import StudySpec
from service.studies.progress import winner

BASE = {"name": "b", "model": {"source": "random:tiny-char"}}


def spec(primary: str = "exact_match") -> StudySpec:
    return StudySpec.model_validate(
        {
            "name": "s",
            "base": BASE,
            "arms": [{"name": "smmd"}, {"name": "emd"}],
            "primary_metric": primary,
            "promote": "production",
        }
    )


def comparison(*arms: tuple[str, float | None, float | None]) -> dict[str, Any]:
    rows = [{"arm": "ce", "vs_ce": None}]
    rows += [{"arm": a, "vs_ce": {"diff": d, "p_holm": p}} for a, d, p in arms]
    return {"arms": rows}


def test_the_best_significant_improvement_wins() -> None:
    found = comparison(("smmd", 0.13, 0.008), ("emd", 0.2, 0.04))
    assert winner(spec(), found) == "emd"


def test_not_significant_after_holm_or_worse_is_not_promoted() -> None:
    assert winner(spec(), comparison(("smmd", 0.13, 0.06), ("emd", -0.2, 0.001))) is None
    assert winner(spec(), comparison(("smmd", 0.0, 0.0), ("emd", None, None))) is None


def test_lower_is_better_metrics_promote_a_decrease() -> None:
    found = comparison(("smmd", -3.0, 0.01), ("emd", 2.0, 0.001))
    assert winner(spec("mae"), found) == "smmd"
