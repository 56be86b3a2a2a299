"""Every enumeration is defined once; the places that use it agree with that one list."""

from __future__ import annotations

import inspect
from typing import get_args, get_type_hints

import pytest
import torch.nn.functional as F

from jobs.data import tokenize
from jobs.losses import fused
from jobs.losses.core import TERMS  # core imports every term module
from jobs.losses.terms import register_term
from jobs.spec import (
    LOSS_NAMES,
    METRIC_MODES,
    JobSpec,
    LossName,
    LossSpec,
    MetricName,
    SearchDim,
    TrainSpec,
    TuneSpec,
)
from service.auth.access import admit
from service.auth.callers import require
from service.cli import progress
from service.jobs import states
from service.jobs.reconciler import Reconciler
from service.jobs.schemas import JobOut, TokenCreate
from service.store import SCOPES, JobStore, Principal, Scope


def test_every_registered_term_is_a_selectable_loss_and_back() -> None:
    assert get_args(LossName) == LOSS_NAMES
    assert LossSpec.model_fields["name"].annotation == LossName
    assert set(TERMS) == set(LOSS_NAMES) - {"ce"}  # ce is the term-free loss
    for name in LOSS_NAMES:
        assert LossSpec(name=name).name == name


@pytest.mark.parametrize("name", ["ce", "cubic"])
def test_a_term_no_spec_can_select_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="not a loss declared"):
        register_term(name)
    assert name not in TERMS


def tune_spec(metric: str) -> TuneSpec:
    base = JobSpec(name="base", train=TrainSpec(eval_every=1))
    space = {"weight": SearchDim(kind="choice", values=(0.1,))}
    return TuneSpec.model_validate({"name": "t", "base": base, "space": space, "metric": metric})


def test_every_metric_has_exactly_one_mode() -> None:
    assert tuple(METRIC_MODES) == get_args(MetricName)
    assert set(METRIC_MODES.values()) == {"max", "min"}
    for spec_class in (TrainSpec, TuneSpec):
        assert spec_class.model_fields["metric"].annotation == MetricName
    for metric, mode in METRIC_MODES.items():
        assert TrainSpec(metric=metric).metric_mode == mode
        assert tune_spec(metric).metric_mode == mode


def test_job_states_are_one_set_across_schemas_store_and_reconciler() -> None:
    everything = set(states.JOB_STATES)
    assert set(get_args(JobOut.model_fields["status"].annotation)) == everything
    # Every state is active, ended, or paused (neither: it holds nothing, a resume queues it).
    assert set(states.ACTIVE) | states.TERMINAL | {"paused"} == everything
    assert not set(states.ACTIVE) & states.TERMINAL and "paused" not in states.TERMINAL
    # Only active and paused states move on, and only to known states.
    assert set(states.ALLOWED) == {*states.ACTIVE, "paused"}
    assert set().union(*states.ALLOWED.values()) <= everything
    assert progress.TERMINAL is states.TERMINAL
    # What the store and the reconciler write is typed with the one Literal (mypy checks
    # each literal state they name against it).
    assert get_type_hints(JobStore.transition)["new"] == states.JobStatus
    assert get_type_hints(Reconciler.finish)["status"] == states.JobStatus


def test_the_ignored_label_is_one_value() -> None:
    assert tokenize.IGNORE is fused.IGNORE
    # The Hugging Face convention the data follows is PyTorch's default ignore_index.
    assert inspect.signature(F.cross_entropy).parameters["ignore_index"].default == fused.IGNORE


def test_token_scopes_are_one_list() -> None:
    assert get_args(Scope) == SCOPES
    item = get_args(TokenCreate.model_fields["scopes"].annotation)[0]
    assert item == Scope
    for checker, parameter in ((require, "scope"), (admit, "scope"), (Principal.allows, "scope")):
        assert get_type_hints(checker)[parameter] == Scope
