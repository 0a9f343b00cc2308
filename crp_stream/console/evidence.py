"""A claim's evidence by partition (source), and its epochs drawn as a server-rendered SVG timeline."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from crp_stream.processors.base import rfc3339

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


@dataclass(frozen=True)
class Partition:
    source: str
    trust: float
    values: tuple[tuple[str, int], ...]  # value -> records, most asserted first
    records: int
    epochs: tuple[tuple[int, str], ...]  # (epoch µs, value), oldest first
    statuses: tuple[tuple[str, int], ...]

    @property
    def first(self) -> int:
        return self.epochs[0][0]

    @property
    def last(self) -> int:
        return self.epochs[-1][0]


def value_of(fact: Mapping[str, Any]) -> str:
    value, unit = fact.get("value"), fact.get("unit")
    if value is None:
        return str(fact.get("text", ""))[:60]
    return f"{value} {unit}" if unit else str(value)


def partitions(facts: Iterable[Mapping[str, Any]]) -> list[Partition]:
    """Facts of one claim grouped by source, most trusted first."""
    by_source: dict[str, list[Mapping[str, Any]]] = {}
    for f in facts:
        by_source.setdefault(str(f["source"]), []).append(f)
    out = []
    for source, rows in by_source.items():
        epochs = sorted((int(r["epoch_us"]), value_of(r)) for r in rows)
        values = Counter(value_of(r) for r in rows).most_common()
        statuses = sorted(Counter(str(r["status"]) for r in rows).items())
        out.append(Partition(source, float(rows[0]["trust"]), tuple(values), len(rows), tuple(epochs), tuple(statuses)))
    return sorted(out, key=lambda p: (-p.trust, p.source))


def timeline_svg(parts: Sequence[Partition], *, width: int = 760, highlight: str | None = None) -> Markup:
    """One row per partition, one dot per record at its epoch, coloured by value; a legend of values."""
    if not parts:
        return Markup("<p class='muted'>no evidence in the fabric</p>")
    label_w, row_h, top, pad = 190, 28, 24, 14
    values = list(dict.fromkeys(v for p in parts for _t, v in p.epochs))
    colour = {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(values)}
    lo = min(p.first for p in parts)
    hi = max(p.last for p in parts)
    span = max(hi - lo, 1)
    plot_w = width - label_w - pad

    def x(us: int) -> float:
        return label_w + (plot_w * (us - lo) / span if hi > lo else plot_w / 2)

    height = top + row_h * len(parts) + 40 + 18 * ((len(values) + 2) // 3)
    el = [
        f"<svg xmlns='http://www.w3.org/2000/svg' class='timeline' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img' aria-label='epochs of the evidence by partition'>"
    ]
    cut = 23 if span < 60_000_000 else 19  # milliseconds when the evidence spans less than a minute
    el.append(f"<text x='{label_w}' y='14' class='axis'>{escape(rfc3339(lo)[:cut])}Z</text>")
    el.append(f"<text x='{width - pad}' y='14' class='axis' text-anchor='end'>{escape(rfc3339(hi)[:cut])}Z</text>")
    for i, p in enumerate(parts):
        y = top + row_h * i + row_h / 2
        cls = "row hl" if p.source == highlight else "row"
        el.append(f"<g class='{cls}' data-source='{escape(p.source)}'>")
        el.append(f"<line x1='{label_w}' x2='{width - pad}' y1='{y}' y2='{y}' class='grid'/>")
        el.append(f"<text x='4' y='{y + 4}' class='label'>{escape(p.source)} ({p.trust:.2f})</text>")
        for ts, v in p.epochs:
            el.append(
                f"<circle cx='{x(ts):.1f}' cy='{y}' r='5' fill='{colour[v]}' fill-opacity='0.75'>"
                f"<title>{escape(p.source)}: {escape(v)} at {escape(rfc3339(ts))}</title></circle>"
            )
        el.append("</g>")
    ly = top + row_h * len(parts) + 20
    for i, v in enumerate(values):
        lx, lyy = label_w + (i % 3) * 180, ly + 18 * (i // 3)
        el.append(
            f"<circle cx='{lx}' cy='{lyy - 4}' r='5' fill='{colour[v]}'/>"
            f"<text x='{lx + 10}' y='{lyy}' class='legend'>{escape(v)}</text>"
        )
    el.append("</svg>")
    return Markup("".join(el))
