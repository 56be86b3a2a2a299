"""A reference that is not a language model, for table tasks: scikit-learn's histogram
gradient boosting (HistGradientBoostingRegressor) on the training rows of the job's own
split (jobs/data/table.py), scored on its held-out rows, per seed.

Features: the columns the prompt shows; a column is numeric when every value in it parses
as a number (missing values become NaN, which the trees route), else categorical, coded by
frequency in the training rows (at most MAX_CATEGORIES; rarer and unseen values are NaN)
and split natively by the trees.

Point predictions: loss `absolute_error` (the median minimises MAE), fitted on every
training row, rounded to the target's decimals as the language model writes its answers.

The 90 % interval: split-conformal. Per seed, CALIBRATION_SHARE of the training rows
(drawn with that seed) are carved off, a second model fits the rest, and the interval is
its prediction ± the ⌈(n + 1)·0.9⌉-th smallest absolute residual on the carved rows: at
least 90 % coverage on exchangeable rows, whatever the model. So seeds differ only in the
carve: the trees themselves are deterministic (no early stopping, no subsampling).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn import __version__ as SKLEARN_VERSION
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from jobs.data.table import MISSING, Table, TableSplit
from jobs.spec import DataSpec
from jobs.stats import QuestionRecord
from jobs.stats.bootstrap import question_values

LEVEL = 0.9
CALIBRATION_SHARE = 0.2
MIN_CALIBRATION = 10  # with fewer carved rows the 90 % quantile is not defined: no interval
MAX_CATEGORIES = 250  # the trees split at most 255 bins, NaN included
# Training rows the reference fits at most (a seeded draw beyond): it runs in the control
# plane's study loop, 1 + seeds fits, and a few hundred thousand rows say what it can say.
MAX_FIT_ROWS = 200_000
POINT_METRICS = ("exact_match", "mae", "within_5pct", "median_rel_error")
METHOD = {
    "model": f"scikit-learn {SKLEARN_VERSION} HistGradientBoostingRegressor",
    "point": "loss absolute_error, fitted on every training row, rounded to the target's decimals",
    "interval": (
        f"split-conformal {LEVEL:.0%}: {CALIBRATION_SHARE:.0%} of the training rows carved off "
        "per seed, a model fitted on the rest, ± the conformal quantile of its absolute "
        "residuals on the carved rows"
    ),
}


@dataclass(frozen=True)
class Encoded:
    train: np.ndarray  # [train rows, features]
    held: np.ndarray  # [held rows, features]
    categorical: list[bool]  # per feature
    kinds: dict[str, str]  # feature -> numeric | categorical


def _number(cell: str) -> float | None:
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _column(table: Table, rows: list[int], name: str) -> list[str]:
    k = table.columns.index(name)
    return [table.rows[i][k] for i in rows]


def encode(split: TableSplit, data: DataSpec) -> Encoded:
    """The feature matrices of the training and held-out rows (see the module's docstring)."""
    names = data.shown_columns(split.table.columns)
    train_cols, held_cols, categorical, kinds = [], [], [], {}
    for name in names:
        train = _column(split.table, split.train, name)
        held = _column(split.held_table, split.held, name)
        present = [c for c in train + held if c not in MISSING]
        if all(_number(c) is not None for c in present):
            code: dict[str, float] = {}
            kinds[name] = "numeric"
        else:
            counts: dict[str, int] = {}
            for c in train:
                if c not in MISSING:
                    counts[c] = counts.get(c, 0) + 1
            ranked = sorted(counts, key=lambda c: (-counts[c], c))[:MAX_CATEGORIES]
            code = {c: float(i) for i, c in enumerate(ranked)}
            kinds[name] = "categorical"

        def value(cell: str, code: dict[str, float] = code, name: str = name) -> float:
            if cell in MISSING:
                return math.nan
            if kinds[name] == "numeric":
                return _number(cell) or 0.0
            return code.get(cell, math.nan)

        train_cols.append([value(c) for c in train])
        held_cols.append([value(c) for c in held])
        categorical.append(kinds[name] == "categorical")
    shape = (len(split.train), 0)
    x_train = np.asarray(train_cols, dtype=float).T if names else np.zeros(shape)
    x_held = np.asarray(held_cols, dtype=float).T if names else np.zeros((len(split.held), 0))
    return Encoded(x_train, x_held, categorical, kinds)


def _model(categorical: list[bool], seed: int) -> HistGradientBoostingRegressor:
    return HistGradientBoostingRegressor(
        loss="absolute_error",
        early_stopping=False,
        random_state=seed,
        categorical_features=np.asarray(categorical, dtype=bool) if any(categorical) else None,
    )


def conformal_interval(
    x: Encoded, y: np.ndarray, seed: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """(low, high) per held-out row [held rows] each; None with too few rows to carve."""
    n = len(y)
    carve = round(n * CALIBRATION_SHARE)
    if carve < MIN_CALIBRATION or n - carve < MIN_CALIBRATION:
        return None
    order = np.random.default_rng(seed).permutation(n)
    cal, fit = order[:carve], order[carve:]
    model = _model(x.categorical, seed).fit(x.train[fit], y[fit])
    residuals = np.sort(np.abs(y[cal] - model.predict(x.train[cal])))
    rank = math.ceil((carve + 1) * LEVEL)
    if rank > carve:
        return None
    centre = model.predict(x.held)
    return centre - residuals[rank - 1], centre + residuals[rank - 1]


def _interval_metrics(low: np.ndarray, high: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Coverage, median width relative to the answer, and mean interval (Winkler) score:
    width + (2/α)·distance outside, α = 1 − LEVEL (jobs/infer/scores.py's interval score)."""
    alpha = 1.0 - LEVEL
    outside = np.maximum(low - y, 0.0) + np.maximum(y - high, 0.0)
    return {
        "interval_coverage_90": float(np.mean((low <= y) & (y <= high))),
        "interval_width_90": float(np.median((high - low) / np.maximum(np.abs(y), 1.0))),
        "interval_score_90": float(np.mean(high - low + 2.0 / alpha * outside)),
    }


def point_records(split: TableSplit, predictions: np.ndarray) -> list[QuestionRecord]:
    """The predictions judged as a run's answers are (exact at the target's decimals)."""
    decimals = split.target.decimals
    records = []
    for i, value in zip(split.held, predictions, strict=True):
        y = split.held_target.values[i]
        shown = f"{value:.{decimals}f}"
        error = abs(float(shown) - y)
        records.append(
            QuestionRecord(
                target=split.held_target.answer(i), prediction=shown, value=float(shown),
                target_value=y, correct=error <= 1e-9 * max(1.0, abs(y)), abs_error=error,
            )
        )  # fmt: skip
    return records


def point_metrics(records: list[QuestionRecord]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for metric in POINT_METRICS:
        values = question_values(records, metric)
        if values is None or np.isnan(values).all():
            out[metric] = None
            continue
        reduce = np.nanmedian if metric == "median_rel_error" else np.nanmean
        out[metric] = float(reduce(values))
    return out


def fit_reference(split: TableSplit, data: DataSpec, seeds: list[int]) -> dict[str, Any]:
    """The reference's figures per seed and their means over seeds, and how they were made."""
    # One OpenMP thread: on a shared machine more threads fight over the cores and a few
    # hundred rows fit 30 times slower (18 s instead of 0.6 s for 3 seeds, measured).
    with threadpool_limits(1):
        return _fit(split, data, seeds)


def _fit(split: TableSplit, data: DataSpec, seeds: list[int]) -> dict[str, Any]:
    x = encode(split, data)
    y = np.asarray([split.target.values[i] for i in split.train], dtype=float)
    if len(y) > MAX_FIT_ROWS:
        drawn = np.sort(np.random.default_rng(0).choice(len(y), MAX_FIT_ROWS, replace=False))
        x = Encoded(x.train[drawn], x.held, x.categorical, x.kinds)
        y = y[drawn]
    truth = np.asarray([split.held_target.values[i] for i in split.held], dtype=float)
    point = _model(x.categorical, 0).fit(x.train, y).predict(x.held)
    base = point_metrics(point_records(split, np.round(point, split.target.decimals)))
    per_seed: dict[int, dict[str, float | None]] = {}
    for seed in seeds:
        per_seed[seed] = dict(base)
        interval = conformal_interval(x, y, seed)
        if interval is not None:
            per_seed[seed].update(_interval_metrics(*interval, truth))
    keys = list(dict.fromkeys(k for m in per_seed.values() for k in m))
    mean: dict[str, float | None] = {}
    for key in keys:
        values = [v for m in per_seed.values() if (v := m.get(key)) is not None]
        mean[key] = float(np.mean(values)) if values else None
    runs = [{"seed": seed, "metrics": metrics} for seed, metrics in per_seed.items()]
    return {
        **METHOD,
        "train_rows": len(split.train),
        "fitted_rows": len(y),  # all of them, or a seeded draw of MAX_FIT_ROWS
        "test_rows": len(split.held),
        "features": x.kinds,
        "runs": runs,
        "mean": mean,
    }
