"""A version's calibration record in the layout written before issue 33 (the record the
issue quotes, its levels abridged): what the readers of old records are tested on."""

from __future__ import annotations

from typing import Any

OLD: dict[str, Any] = {
    "n": 150, "samples": 16, "temperature": 1.0, "period": None,
    "source": "held-out split of the job",
    "levels": [
        {"level": 0.9, "coverage": 0.98, "width": 20500.0, "calibrated_mass": 0.97,
         "calibrated_coverage": 0.907, "calibrated_width": 11017.0},
        {"level": 0.95, "coverage": 0.99, "width": 24000.0, "calibrated_mass": 19.0,
         "calibrated_coverage": 0.96, "calibrated_width": 15300.0},
    ],
    "estimators": {"greedy": {"mae": 50.0, "median_rel_error": 0.1, "exact_match": 0.2,
                              "answered": 1.0}},
    "best": "greedy",
}  # fmt: skip
