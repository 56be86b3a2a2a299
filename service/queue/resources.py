"""What a job holds of the cluster and what the cluster has: CPUs and GPUs, as Ray counts
them. Admission (service/queue/admission.py) and preemption (service/queue/preemption.py) add and
compare these; nothing here knows of jobs."""

from __future__ import annotations

from dataclasses import dataclass

EPSILON = 1e-9


@dataclass(frozen=True)
class Resources:
    cpu: float = 0.0
    gpu: float = 0.0

    def fits_in(self, other: Resources) -> bool:
        return self.cpu <= other.cpu + EPSILON and self.gpu <= other.gpu + EPSILON

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.gpu + other.gpu)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(max(0.0, self.cpu - other.cpu), max(0.0, self.gpu - other.gpu))

    def __str__(self) -> str:
        text = f"{self.cpu:g} CPU"
        return f"{text}, {self.gpu:g} GPU" if self.gpu else text

    @property
    def empty(self) -> bool:
        return self.cpu <= EPSILON and self.gpu <= EPSILON


@dataclass(frozen=True)
class Capacity:
    """The cluster as Ray reports it: everything it has, and what is unreserved now."""

    total: Resources
    available: Resources
