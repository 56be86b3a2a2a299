"""A finished cell's headline (bench/cell_headline.py) reads each primary test's sign
against its metric's direction: a lower MAE is better, a higher exact match is."""

from __future__ import annotations

from typing import Any

from tests.support.bench import load

cell_headline = load("cell_headline")


def primary(
    metric: str, diff: float, p_holm: float | None, *, up: bool, eq: bool = False
) -> dict[str, Any]:
    """A primary test as the service records it (p_holm None: no t-test could be run)."""
    p = None if p_holm is None else p_holm / 2
    better = (diff > 0) == up
    return {"metric": metric, "higher_is_better": up, "seeds": [0, 1, 2, 3, 4],
            "unpaired_seeds": [], "n": 5, "diff": diff,
            "ci": {"low": diff - 1, "high": diff + 1}, "t": None if p is None else 3.0, "p": p,
            "d_z": None, "wins": 5 if better else 0, "losses": 0 if better else 5, "ties": 0,
            "ci_boot": None, "p_boot": None, "boot_seeds": 0, "notes": [], "p_holm": p_holm,
            "margin": 50.0, "p_tost": 0.01 if eq else 0.9, "p_tost_holm": 0.02 if eq else 1.0,
            "equivalent": eq}  # fmt: skip


def comparison(*arms: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = [{"arm": "ce", "mean": {"mae": 250.0, "exact_match": 0.4}}]
    rows += [{"arm": name, "primary_tests": tests} for name, tests in arms]
    return {"baseline": "ce", "alpha": 0.05, "primaries": ["mae", "exact_match"], "arms": rows}


def test_a_lower_mae_is_better_and_a_lower_exact_match_worse() -> None:
    emd = [primary("mae", -20.0, 0.01, up=False), primary("exact_match", -0.05, 0.03, up=True)]
    smmd = [
        primary("mae", 3.0, 0.9, up=False, eq=True),
        primary("exact_match", 0.01, None, up=True),
    ]
    result = {"comparison": comparison(("emd", emd), ("smmd", smmd))}
    assert cell_headline.headline(result) == [
        "**Better than `ce`: `emd` on MAE (−20.00 [−21.00, −19.00], p_Holm 0.01).** "
        "Worse than `ce`: `emd` on exact match (−0.05 [−1.05, +0.95], p_Holm 0.03). "
        "Shown equivalent to `ce` (TOST, Holm over the family): `smmd` on MAE (±50). "
        "Neither a difference nor equivalence shown: `smmd` on exact match."
    ]


def test_a_higher_mae_is_worse_and_no_gain_says_so_with_the_reference() -> None:
    result = {
        "comparison": comparison(("dist2", [primary("mae", 30.0, 0.02, up=False)])),
        "reference": {"mean": {"mae": 278.14, "exact_match": 0.0}},
    }
    assert cell_headline.headline(result) == [
        "**No arm beat `ce` on MAE or exact match.** "
        "Worse than `ce`: `dist2` on MAE (+30.00 [+29.00, +31.00], p_Holm 0.02). "
        "The gradient-boosting reference (not a language model, untested): MAE 278.1 "
        "(`ce` 250); exact match 0 (`ce` 0.4)."
    ]
