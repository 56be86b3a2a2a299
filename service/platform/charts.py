"""Inline SVG charts rendered on the server: no charting library, no script needed to see
them, and the polled fragments carry them ready-drawn. Every value is escaped; the
charts only scale numbers into a box."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from markupsafe import Markup

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563")
W, H, PAD_L, PAD_R, PAD_T, PAD_B = 640, 230, 56, 12, 36, 28


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]
    color: str = PALETTE[0]
    dashed: bool = False


@dataclass
class Dot:
    x: float
    y: float
    shade: float  # 0..1: the colour scale (a sweep's weight)
    label: str
    best: bool = False
    stopped: bool = False
    extra: dict[str, str] = field(default_factory=dict)


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def _finite(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(x, y) for x, y in points if math.isfinite(x) and math.isfinite(y)]


MAX_DRAWN = 800  # points per line: more than the chart has pixels is only bytes


def _thin(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Every k-th point (the last always kept) so that a long run's curve stays small."""
    if len(points) <= MAX_DRAWN:
        return points
    thinned = points[:: math.ceil(len(points) / MAX_DRAWN)]
    if thinned[-1] != points[-1]:
        thinned.append(points[-1])
    return thinned


class _Box:
    """Maps data coordinates into the plot area (optionally log-scaled on x)."""

    def __init__(
        self, xs: list[float], ys: list[float], log_x: bool = False, margin: float = 0.0
    ) -> None:
        self.log_x = log_x
        tx = [math.log10(x) for x in xs if x > 0] if log_x else xs
        self.x0, self.x1 = (min(tx), max(tx)) if tx else (0.0, 1.0)
        self.y0, self.y1 = (min(ys), max(ys)) if ys else (0.0, 1.0)
        if self.x1 == self.x0:
            self.x0, self.x1 = self.x0 - 0.5, self.x1 + 0.5
        if self.y1 == self.y0:
            self.y0, self.y1 = self.y0 - 0.5, self.y1 + 0.5
        # Room around the data, so that markers at the extremes are not cut by the frame.
        dx, dy = (self.x1 - self.x0) * margin, (self.y1 - self.y0) * margin
        self.x0, self.x1, self.y0, self.y1 = self.x0 - dx, self.x1 + dx, self.y0 - dy, self.y1 + dy

    def px(self, x: float) -> float:
        v = math.log10(x) if self.log_x else x
        return PAD_L + (v - self.x0) / (self.x1 - self.x0) * (W - PAD_L - PAD_R)

    def py(self, y: float) -> float:
        return H - PAD_B - (y - self.y0) / (self.y1 - self.y0) * (H - PAD_T - PAD_B)

    def axes(self, x_label: str, y_label: str) -> str:
        xl = 10**self.x0 if self.log_x else self.x0
        xr = 10**self.x1 if self.log_x else self.x1
        bottom, right = H - PAD_B, W - PAD_R
        return (
            f'<line x1="{PAD_L}" y1="{bottom}" x2="{right}" y2="{bottom}" class="axis"/>'
            f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{bottom}" class="axis"/>'
            f'<text x="{PAD_L - 4}" y="{PAD_T + 4}" text-anchor="end">{_fmt(self.y1)}</text>'
            f'<text x="{PAD_L - 4}" y="{bottom}" text-anchor="end">{_fmt(self.y0)}</text>'
            f'<text x="{PAD_L}" y="{H - 10}">{_fmt(xl)}</text>'
            f'<text x="{right}" y="{H - 10}" text-anchor="end">{_fmt(xr)}</text>'
            f'<text x="{(PAD_L + right) / 2}" y="{H - 4}" text-anchor="middle">'
            f"{escape(x_label)}</text>"
            f'<text x="4" y="12">{escape(y_label)}</text>'
        )


def _svg(body: str, title: str, kind: str) -> Markup:
    return Markup(
        f'<svg class="chart" data-chart="{escape(kind)}" viewBox="0 0 {W} {H}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>{body}</svg>'
    )


def line_chart(
    series: list[Series], title: str, x_label: str = "step", y_label: str = ""
) -> Markup:
    """Lines over steps with a legend; series without a finite point are left out."""
    drawn = [s for s in series if _finite(s.points)]
    if not drawn:
        return Markup(f'<p class="empty">{escape(title)}: no points yet</p>')
    xs = [x for s in drawn for x, _ in _finite(s.points)]
    ys = [y for s in drawn for _, y in _finite(s.points)]
    box = _Box(xs, ys)
    body = [box.axes(x_label, y_label)]
    for i, s in enumerate(drawn):
        points = _finite(s.points)
        pts = " ".join(f"{box.px(x):.1f},{box.py(y):.1f}" for x, y in _thin(points))
        dash = ' stroke-dasharray="5 3"' if s.dashed else ""
        body.append(
            f'<polyline points="{pts}" fill="none" stroke="{s.color}" stroke-width="1.8"{dash} '
            f'data-series="{escape(s.name)}" data-points="{len(points)}"/>'
        )
        if i < 4:  # a legend row under the y label; more series are named in their titles
            lx, ly = PAD_L + 8 + i * 145, 26
            body.append(
                f'<rect x="{lx}" y="{ly - 5}" width="10" height="3" fill="{s.color}"/>'
                f'<text x="{lx + 14}" y="{ly}">{escape(s.name[:22])}</text>'
            )
    return _svg("".join(body), title, "line")


def scatter(dots: list[Dot], title: str, x_label: str, y_label: str) -> Markup:
    """A sweep's trials: log x (bandwidth), colour from `shade`, the best ringed, an
    early-stopped trial hollow."""
    dots = [d for d in dots if math.isfinite(d.x) and math.isfinite(d.y) and d.x > 0]
    if not dots:
        return Markup(f'<p class="empty">{escape(title)}: no finished trial yet</p>')
    box = _Box([d.x for d in dots], [d.y for d in dots], log_x=True, margin=0.08)
    body = [box.axes(x_label, y_label)]
    for d in dots:
        # Light blue (low) to dark red (high): readable without a legend box.
        r, g, b = int(60 + 170 * d.shade), int(120 - 80 * d.shade), int(220 - 170 * d.shade)
        colour = f"rgb({r},{g},{b})"
        cx, cy = box.px(d.x), box.py(d.y)
        fill = "white" if d.stopped else colour
        body.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="6" fill="{fill}" stroke="{colour}" '
            f'stroke-width="2" class="trial{" stopped" if d.stopped else ""}">'
            f"<title>{escape(d.label)}</title></circle>"
        )
        if d.best:
            body.append(
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="11" fill="none" stroke="#111" '
                f'stroke-width="1.5" class="best"/><text x="{cx + 13:.1f}" y="{cy + 4:.1f}">'
                "best</text>"
            )
    return _svg("".join(body), title, "scatter")


def histogram(
    values: list[float],
    title: str,
    marks: dict[str, float] | None = None,
    band: tuple[float, float] | None = None,
    bins: int = 12,
) -> Markup:
    """The K sampled values in `bins` bars, the interval shaded, marks as vertical lines."""
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return Markup(f'<p class="empty">{escape(title)}: no sample gave a number</p>')
    marks = {k: v for k, v in (marks or {}).items() if v is not None and math.isfinite(v)}
    lo = min([*values, *marks.values(), *(band or ())])
    hi = max([*values, *marks.values(), *(band or ())])
    if hi == lo:
        lo, hi = lo - 0.5, hi + 0.5
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / width), bins - 1)] += 1
    box = _Box([lo, hi], [0.0, float(max(counts))])
    body = [box.axes("value", "samples")]
    if band is not None:
        x0, x1 = box.px(band[0]), box.px(band[1])
        body.append(
            f'<rect x="{x0:.1f}" y="{PAD_T}" width="{max(x1 - x0, 1):.1f}" '
            f'height="{H - PAD_T - PAD_B}" fill="#fde68a" opacity="0.5" class="interval"/>'
        )
    for i, c in enumerate(counts):
        if c:
            x0, x1 = box.px(lo + i * width), box.px(lo + (i + 1) * width)
            y = box.py(c)
            body.append(
                f'<rect x="{x0 + 1:.1f}" y="{y:.1f}" width="{max(x1 - x0 - 2, 1):.1f}" '
                f'height="{H - PAD_B - y:.1f}" fill="{PALETTE[0]}" class="bar" data-count="{c}"/>'
            )
    for i, (name, v) in enumerate(marks.items()):
        x = box.px(v)
        colour = PALETTE[1 + i]
        body.append(
            f'<line x1="{x:.1f}" y1="{PAD_T}" x2="{x:.1f}" y2="{H - PAD_B}" stroke="{colour}" '
            f'stroke-width="2"/><text x="{x + 3:.1f}" y="{PAD_T + 12 + 12 * i}" '
            f'fill="{colour}">{escape(name)} {_fmt(v)}</text>'
        )
    return _svg("".join(body), title, "histogram")
