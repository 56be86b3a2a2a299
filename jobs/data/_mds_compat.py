"""Make DeepMind's `mathematics_dataset` 1.0.1 import and run on current sympy and numpy.

Three things moved under it since its release: `base_solution_linear` now lives in
`sympy.solvers.diophantine.diophantine`; `np.object` is gone (numpy 1.24); and
`ndarray.itemset` is gone (numpy 2.0), called on arrays `sample/polynomials.py` makes
with `np.zeros` / `np.empty`. Nothing in site-packages is edited: the sympy name is
aliased, and `polynomials` sees a numpy whose zeros/empty return arrays with `itemset`.
Get the library's modules through here (`arithmetic()`), never by importing them first.

The library and sympy are imported on the first call, not with this module: the control
plane imports `jobs.data` to check uploaded files and never generates a problem.
"""

from __future__ import annotations

import functools
import importlib
import types
from typing import Any

import numpy as np


class _ItemsetArray(np.ndarray):
    """ndarray with numpy < 2's `itemset(index, value)`."""

    def itemset(self, index: Any, value: Any) -> None:
        self[index] = value


class _NumpyWithItemset(types.ModuleType):
    """numpy as `polynomials` expects it: `np.object` and arrays that have `itemset`."""

    object = object

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    @staticmethod
    def zeros(*args: Any, **kwargs: Any) -> np.ndarray:
        return np.zeros(*args, **kwargs).view(_ItemsetArray)

    @staticmethod
    def empty(*args: Any, **kwargs: Any) -> np.ndarray:
        return np.empty(*args, **kwargs).view(_ItemsetArray)


@functools.cache
def arithmetic() -> Any:
    """The library's `modules.arithmetic`, patched to run (once per process)."""
    # The package re-exports a *function* named `diophantine`; import the submodule by path.
    diophantine = importlib.import_module("sympy.solvers.diophantine")
    impl = importlib.import_module("sympy.solvers.diophantine.diophantine")
    if not hasattr(diophantine, "base_solution_linear"):
        setattr(diophantine, "base_solution_linear", impl.base_solution_linear)  # noqa: B010

    from mathematics_dataset.sample import polynomials  # needs the alias above

    setattr(polynomials, "np", _NumpyWithItemset("numpy"))  # noqa: B010

    from mathematics_dataset.modules import arithmetic

    return arithmetic
