"""Clock-time questions in text: "What time is it 2 h 35 min after 10:40?" → "13:15".

Scored by minutes off on the 24-hour circle, as the Smooth-MMD seeds score clocks.
`extrapolate` asks for longer gaps (12-47 h) than training ever sees (0-11 h).
"""

from __future__ import annotations

import random

from jobs.data.types import Example

DAY = 24 * 60


def hhmm(minutes: int) -> str:
    minutes %= DAY
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def clock_examples(split: str, size: int, seed: int) -> list[Example]:
    rng = random.Random(f"clock/{split}/{seed}")
    out = []
    for _ in range(size):
        start = rng.randrange(DAY)
        hours = rng.randrange(12, 48) if split == "extrapolate" else rng.randrange(12)
        gap = hours * 60 + rng.randrange(60)
        if rng.random() < 0.5:
            prompt = f"What time is it {hours} h {gap % 60} min after {hhmm(start)}?"
            answer = hhmm(start + gap)
        else:
            prompt = f"What time was it {hours} h {gap % 60} min before {hhmm(start)}?"
            answer = hhmm(start - gap)
        out.append(Example(prompt, answer))
    return out


# Tasks whose answers are times, and the circle each is read on: text clock arithmetic on
# the 24-hour day, analog faces (jobs/data/images.py) on the 12-hour dial.
CLOCK_PERIODS = {"clock": DAY, "clock_face": DAY // 2}


def clock_period(task: str) -> int | None:
    """Minutes in the circle a task's answers live on; None for a task of plain numbers."""
    return CLOCK_PERIODS.get(task)


def minutes_off(predicted: float, target: float, period: int = DAY) -> float:
    """Distance in minutes between two times, the short way round a `period`-minute clock."""
    diff = abs(predicted - target) % period
    return min(diff, period - diff)
