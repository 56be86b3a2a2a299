"""The preemption planner (service/queue/preemption.py) alone: plan in, pauses out, no database.

Ranks: 0 low, 1 normal, 2 high."""

from __future__ import annotations

from service.queue.preemption import Pool, Running, Waiting, fewest, plan_preemptions
from service.queue.resources import Resources

LOW, NORMAL, HIGH = 0, 1, 2


def run(
    name: str, cpu: float, rank: int = LOW, started: float = 0.0, gpu: float = 0.0, **kw: bool
) -> Running:
    checkpointable = kw.get("checkpointable", True)
    return Running(
        name, rank, Resources(cpu, gpu), started, checkpointable, kw.get("pausing", False)
    )


def high(name: str, cpu: float, gpu: float = 0.0, rank: int = HIGH) -> Waiting:
    return Waiting(name, rank, Resources(cpu, gpu), "high")


def victims(waiting: list[Waiting], running: list[Running], free: float = 0.0) -> list[str]:
    return [p.victim for p in plan_preemptions(waiting, running, Resources(free))]


def test_the_fewest_jobs_that_free_enough() -> None:
    running = [run("a", 1, started=1), run("b", 1, started=2), run("c", 4, started=3)]
    running.append(run("d", 2, started=4))
    assert victims([high("h", 4)], running) == ["c"]  # one, though three others started later
    # Two at the least (the latest started of them first), never three small ones.
    assert victims([high("h", 5)], running) == ["d", "c"]
    assert victims([high("h", 8)], running) == ["d", "c", "b", "a"]


def test_among_equally_few_the_lowest_class_then_the_latest_started() -> None:
    running = [
        run("normal", 2, NORMAL, started=30),
        run("low-old", 2, LOW, started=10),
        run("low-new", 2, LOW, started=20),
    ]
    assert victims([high("h", 2)], running) == ["low-new"]
    assert sorted(victims([high("h", 4)], running)) == ["low-new", "low-old"]
    # A bigger job of a higher class is taken only when it keeps the count down.
    running.append(run("normal-big", 4, NORMAL, started=5))
    assert victims([high("h", 4)], running) == ["normal-big"]


def test_never_a_job_that_cannot_checkpoint() -> None:
    running = [run("sweep", 4, checkpointable=False), run("a", 1), run("b", 1)]
    assert sorted(victims([high("h", 2)], running)) == ["a", "b"]
    assert victims([high("h", 3)], running) == []  # the sweep alone would do: not asked


def test_never_a_job_of_the_same_or_a_higher_class() -> None:
    running = [run("same", 2, NORMAL), run("higher", 2, HIGH)]
    assert victims([high("n", 2, rank=NORMAL)], running) == []
    assert victims([high("h", 2)], running) == ["same"]


def test_nothing_when_preempting_would_not_suffice_nor_for_the_jobs_behind() -> None:
    running = [run("a", 1), run("b", 1)]
    # h needs 4 and all the low jobs hold 2: nobody pauses, and the smaller job after
    # it is not helped past it.
    assert victims([high("h", 4), high("h2", 1)], running) == []
    assert sorted(victims([high("h", 4)], running, free=2.0)) == ["a", "b"]


def test_what_is_free_and_what_is_already_pausing_count_first() -> None:
    running = [run("a", 1, started=1), run("b", 1, started=2)]
    assert victims([high("h", 2)], running, free=1.0) == ["b"]  # one more CPU is enough
    on_its_way = [run("a", 1, pausing=True), run("b", 1)]
    assert victims([high("h", 1)], on_its_way) == []  # a's CPU comes free for it
    assert victims([high("h", 2)], on_its_way) == ["b"]  # and only the rest is asked


def test_each_waiting_job_in_order_gets_its_own() -> None:
    running = [run("a", 2, started=1), run("b", 2, started=2), run("c", 2, started=3)]
    plan = plan_preemptions([high("h1", 2), high("h2", 2)], running, Resources())
    assert [(p.victim, p.for_job) for p in plan] == [("c", "h1"), ("b", "h2")]
    assert plan[0].why.startswith("preempted by h1 (high, needs 2 CPU; 0 CPU free)")


def test_gpus_are_freed_by_jobs_that_hold_gpus() -> None:
    running = [run("cpu-only", 8), run("gpu", 1, gpu=1)]
    assert victims([high("h", 1, gpu=1)], running) == ["gpu"]
    assert fewest(Pool([run("cpu-only", 8)]), HIGH, Resources(0, 1)) is None
    assert fewest(Pool([]), HIGH, Resources()) == []
