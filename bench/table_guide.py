"""Render a table study's result (the JSON `GET /v1/studies/{id}` answers, or `numtune study
show ID --json`) into docs/guides/table.md, between its GENERATED markers: every arm's mean
of each primary metric with its difference from `ce`, the interval, Holm's p and the verdict;
the gradient-boosting reference on the same rows beside them (outside the tests); and the
90 % intervals of each.

    python -m bench.table_guide study.json [--page docs/guides/table.md]

Only the part between the markers is rewritten: the prose around it stays as written.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

BEGIN = "<!-- BEGIN GENERATED: table study (bench/table_guide.py) -->"
END = "<!-- END GENERATED -->"
PAGE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "table.md"
INTERVALS = (
    ("coverage", "interval_coverage_90"),
    ("relative_width_median", "interval_width_90"),
    ("winkler_mean", "interval_score_90"),
)


def _num(value: Any, digits: int = 3) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "—"
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def _test_cells(test: dict[str, Any] | None) -> list[str]:
    """diff [CI], Holm's p: em dashes where the arm is the baseline or was not tested."""
    if not test:
        return ["—", "—"]
    ci = test.get("ci") or {}
    diff = test.get("diff")
    signed = "—" if diff is None else f"{'+' if diff > 0 else ''}{_num(diff)}"
    span = f" [{_num(ci.get('low'))}, {_num(ci.get('high'))}]" if ci else ""
    return [signed + span, _num(test.get("p_holm"), 2)]


def point_table(result: dict[str, Any]) -> list[str]:
    comparison = result.get("comparison") or {}
    primaries = comparison.get("primaries") or [comparison.get("primary", "mae")]
    head = ["arm", "seeds"]
    for metric in primaries:
        head += [f"{metric} (mean)", "vs ce [95 % CI]", "p (Holm)"]
    lines = ["| " + " | ".join([*head, "verdict"]) + " |", "|" + "---|" * (len(head) + 1)]
    for arm in comparison.get("arms", []):
        tests = {t.get("metric"): t for t in arm.get("primary_tests") or []}
        if not tests and arm.get("vs_ce"):
            tests = {primaries[0]: arm["vs_ce"]}
        judged = f" ({arm['decoding']})" if arm.get("decoding") else ""  # the arm's decoding
        cells = [f"`{arm['arm']}`{judged}", str(len(arm.get("runs", [])))]
        for metric in primaries:
            cells += [_num(arm.get("mean", {}).get(metric)), *_test_cells(tests.get(metric))]
        lines.append("| " + " | ".join([*cells, arm.get("verdict", "")]) + " |")
    reference = result.get("reference") or {}
    if reference.get("mean"):
        cells = ["gradient boosting (reference)", str(len(reference.get("runs", [])))]
        for metric in primaries:
            cells += [_num(reference["mean"].get(metric)), "—", "—"]
        lines.append("| " + " | ".join([*cells, "not tested: outside the Holm family"]) + " |")
    return lines


def interval_table(result: dict[str, Any]) -> list[str]:
    lines = [
        "| 90 % interval | coverage | median width / answer | interval score |",
        "|---|---|---|---|",
    ]
    for arm, found in (result.get("intervals") or {}).items():
        lines.append(f"| `{arm}` | " + " | ".join(_num(found.get(k)) for k, _ in INTERVALS) + " |")
    mean = (result.get("reference") or {}).get("mean") or {}
    if mean.get("interval_coverage_90") is not None:
        cells = " | ".join(_num(mean.get(key)) for _, key in INTERVALS)
        lines.append(f"| gradient boosting (split-conformal) | {cells} |")
    return lines


def power_lines(power: dict[str, Any] | None) -> list[str]:
    """What the study could have detected, and what each arm's CI rules out."""
    if not power:
        return []
    ruled = [f"- `{a['arm']}`: its 95 % CI {a['rules_out']}." for a in power.get("arms") or []
             if a.get("rules_out")]  # fmt: skip
    return [f"Power: {power['statement']}", "", *ruled, *([""] if ruled else [])]


def render(study: dict[str, Any]) -> str:
    """The generated section's text for one study."""
    result = study.get("result") or {}
    spec = study.get("spec") or {}
    data = (spec.get("base") or {}).get("data") or {}
    reference = result.get("reference") or {}
    about = (
        f"Study `{study.get('name', '?')}` ({study.get('status', '?')}): target "
        f"`{data.get('target', '?')}` of `{data.get('file') or data.get('path') or '?'}`, "
        f"model `{((spec.get('base') or {}).get('model') or {}).get('source', '?')}`, "
        f"seeds {spec.get('seeds', '?')}."
    )
    out = [about, "", *point_table(result), ""]
    if len(interval_table(result)) > 2:
        out += [*interval_table(result), ""]
    out += power_lines(result.get("power"))
    if reference.get("error"):
        out += [f"No gradient-boosting reference: {reference['error']}", ""]
    elif reference:
        out += [f"Reference: {reference.get('model')}; {reference.get('point')}; "
                f"{reference.get('interval')}.", ""]  # fmt: skip
    return "\n".join(out)


def fill(page: str, study: dict[str, Any]) -> str:
    """The page with its generated section replaced by the study's rendering."""
    start, end = page.index(BEGIN) + len(BEGIN), page.index(END)
    return page[:start] + "\n" + render(study) + page[end:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", type=Path, help="the study's JSON (GET /v1/studies/{id})")
    parser.add_argument("--page", type=Path, default=PAGE)
    args = parser.parse_args()
    study = json.loads(args.study.read_text())
    args.page.write_text(fill(args.page.read_text(), study))


if __name__ == "__main__":
    main()
