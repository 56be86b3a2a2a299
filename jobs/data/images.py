"""Image tasks with exact answers, drawn with PIL and seeded: each example is a question,
its answer and the PNG bytes of a small (SIDE × SIDE) picture.

    dots        "How many dots are there?"                → 7      1-9 dots (extrapolate: 10-14)
    bars        "What is the value of the green bar?"     → 11     3 bars, values 1-12 on a
                                                                   2-px grid (extrapolate: 13-15)
    clock_face  "What time does the clock show?"          → "04:35" an analog face, minutes
                                                                   on the 5s (extrapolate: the
                                                                   minutes between them)

Clock answers are read on the 12-hour dial: scored by minutes off on a 720-minute circle
(jobs/data/clock.py). Every split draws its own pictures from its own seed stream.
"""

from __future__ import annotations

import io
import math
import random
from collections.abc import Callable

from PIL import Image, ImageDraw

from jobs.data.clock import hhmm
from jobs.data.types import Example

SIDE = 32  # pixels: the vlm-tiny preset's vision tower takes 32 × 32 (4-px patches)
BAR_COLOURS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (40, 70, 220)}
Draw = Callable[[random.Random, bool], tuple[str, str, Image.Image]]


def _canvas() -> tuple[Image.Image, ImageDraw.ImageDraw]:
    image = Image.new("RGB", (SIDE, SIDE), "white")
    return image, ImageDraw.Draw(image)


def _dots(rng: random.Random, big: bool) -> tuple[str, str, Image.Image]:
    count = rng.randint(10, 14) if big else rng.randint(1, 9)
    image, draw = _canvas()
    # Dots on a 6 × 6 grid of 5-px cells, jittered inside their cell: never touching.
    for cell in rng.sample(range(36), count):
        x = 2 + (cell % 6) * 5 + rng.randint(0, 1)
        y = 2 + (cell // 6) * 5 + rng.randint(0, 1)
        draw.ellipse((x, y, x + 2, y + 2), fill="black")
    return "How many dots are there?", str(count), image


def _bars(rng: random.Random, big: bool) -> tuple[str, str, Image.Image]:
    values = [rng.randint(1, 12) for _ in BAR_COLOURS]
    asked = rng.randrange(len(BAR_COLOURS))
    if big:
        values[asked] = rng.randint(13, 15)
    image, draw = _canvas()
    for i, (colour, value) in enumerate(zip(BAR_COLOURS.values(), values, strict=True)):
        left = 3 + i * 10
        draw.rectangle((left, SIDE - 1 - 2 * value, left + 6, SIDE - 1), fill=colour)
    name = list(BAR_COLOURS)[asked]
    return f"What is the value of the {name} bar?", str(values[asked]), image


def _clock_face(rng: random.Random, big: bool) -> tuple[str, str, Image.Image]:
    hour = rng.randint(1, 12)
    minute = rng.choice([m for m in range(60) if m % 5]) if big else 5 * rng.randrange(12)
    image, draw = _canvas()
    centre = SIDE / 2
    draw.ellipse((1, 1, SIDE - 2, SIDE - 2), outline="black")
    for angle, length, width in (
        ((hour % 12 + minute / 60) / 12, 0.45, 2),  # hour hand: short and thick
        (minute / 60, 0.85, 1),
    ):
        radians = 2 * math.pi * angle
        tip = (centre + length * 14 * math.sin(radians), centre - length * 14 * math.cos(radians))
        draw.line((centre, centre, *tip), fill="black", width=width)
    return "What time does the clock show?", hhmm(hour * 60 + minute), image


DRAWERS: dict[str, Draw] = {"dots": _dots, "bars": _bars, "clock_face": _clock_face}


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def image_examples(task: str, split: str, size: int, seed: int) -> list[Example]:
    """`size` examples of an image task's split, the same for the same seed."""
    rng = random.Random(f"{task}/{split}/{seed}")
    draw = DRAWERS[task]
    out = []
    for _ in range(size):
        prompt, answer, image = draw(rng, split == "extrapolate")
        out.append(Example(prompt, answer, png(image)))
    return out
