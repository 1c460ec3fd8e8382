"""The picture of docs/tracing.md: one real task's trace, drawn from the spans it exported.

Runs a small trip task (a step whose first attempt fails and whose retry waits 10 minutes, a
``map`` of two items that each rest, an hour's nap) on the in-memory backend with a virtual
clock, ``Tracing`` exporting to an ``InMemorySpanExporter``, and writes an SVG waterfall of the
spans: one row a span, indented under its parent, coloured by status. Idle time between
invocations (the task waits without compute) is drawn as a short break labelled with its
length, so that the invocations' milliseconds stay visible beside the hour. Written by hand,
no plotting library: ``python -m benchmarks.trace_waterfall docs/tracing-waterfall.svg
[--naming aws]``; it prints ``trace_waterfall.spans: <n> spans``.
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from continuum import Continuum, TaskContext

#: Drawing sizes (pixels): a row, the names' column, an invocation's width, an idle break's.
ROW_PX, NAMES_PX, INVOCATION_PX, BREAK_PX = 18, 260, 190, 46
STATUS_COLOURS = {"OK": "#3b8f5a", "ERROR": "#c0392b", "UNSET": "#9aa3ad"}


class Trip(BaseModel):
    cities: list[str] = ["Oslo", "Bergen"]


def traced_trip(naming: str = "continuum") -> list[Any]:
    """Run the trip task to its end; return the spans its tracing exported."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from continuum._local.runtime import LocalRuntime
    from continuum.integrations.opentelemetry import Tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = Continuum()
    app.observe(Tracing(tracer_provider=provider, naming=naming))  # type: ignore[arg-type]
    failures: list[str] = []

    @app.step(retries=1, backoff_s=600)
    def book(city: str) -> str:
        if city == "Oslo" and not failures:
            failures.append(city)
            raise ConnectionError("the booking site is down")
        return f"booked {city}"

    def visit(ctx: TaskContext[Trip], city: str, index: int) -> str:
        booked = book(city)
        ctx.sleep(120, name="rest")
        return booked

    @app.task(state=Trip)
    def trip(ctx: TaskContext[Trip]) -> list[str]:
        booked = ctx.map(ctx.state.cities, visit, name="cities").values()
        ctx.sleep(3600, name="nap")
        return booked

    runtime = LocalRuntime(app, budget_s=30, backend="memory", virtual_time=True)
    runtime.drive(app.client().start("trip", {}, task_id="trip-1"))
    return list(exporter.get_finished_spans())


def _rows(spans: list[Any]) -> list[tuple[int, Any]]:
    """The spans depth first under their parents, each with its depth; siblings by start."""
    ids = {s.context.span_id for s in spans}
    below: dict[int | None, list[Any]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        below.setdefault(parent if parent in ids else None, []).append(span)
    rows: list[tuple[int, Any]] = []

    def visit(parent: int | None, depth: int) -> None:
        for span in sorted(below.get(parent, []), key=lambda s: (s.start_time, s.name)):
            rows.append((depth, span))
            visit(span.context.span_id, depth + 1)

    visit(None, 0)
    return rows


class _Axis:
    """Time to x: each invocation gets the same width, each idle stretch a short break."""

    def __init__(self, spans: list[Any], invocation_name: str) -> None:
        start = min(s.start_time for s in spans)
        end = max(s.end_time for s in spans)
        busy = sorted(
            (s.start_time, s.end_time)
            for s in spans
            if s.name == invocation_name and s.status.status_code.name != "UNSET"
        )
        self.pieces: list[tuple[int, int, float, float]] = []  # (t0, t1, x0, width)
        x, at = float(NAMES_PX), start
        for begin, finish in busy:
            if begin > at:
                self.pieces.append((at, begin, x, BREAK_PX))
                x += BREAK_PX
            self.pieces.append((begin, finish, x, INVOCATION_PX))
            x += INVOCATION_PX
            at = max(at, finish)
        if end > at:
            self.pieces.append((at, end, x, BREAK_PX))
            x += BREAK_PX
        self.width = x + 20

    def x(self, t: int) -> float:
        for t0, t1, x0, width in self.pieces:
            if t <= t1:
                return x0 + width * (max(t, t0) - t0) / max(t1 - t0, 1)
        return self.pieces[-1][2] + self.pieces[-1][3]

    def breaks(self) -> list[tuple[float, str]]:
        out = []
        for t0, t1, x0, width in self.pieces:
            if width == BREAK_PX and t1 - t0 >= 1e9:  # a wait, not the start-up before a claim
                out.append((x0 + width / 2, "waited " + _duration((t1 - t0) / 1e9)))
        return out


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.1f} s"


def waterfall_svg(spans: list[Any], invocation_name: str = "invocation") -> str:
    """An SVG waterfall of ``spans`` (one trace)."""
    rows = _rows(spans)
    axis = _Axis(spans, invocation_name)
    height = ROW_PX * (len(rows) + 2) + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{axis.width:.0f}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{axis.width:.0f}" height="{height}" fill="white"/>',
    ]
    for x, label in axis.breaks():
        out.append(
            f'<line x1="{x:.1f}" y1="4" x2="{x:.1f}" y2="{height - 4}" stroke="#ccc" '
            'stroke-dasharray="3,3"/>'
        )
        out.append(f'<text x="{x:.1f}" y="12" text-anchor="middle" fill="#777">{label}</text>')
    for i, (depth, span) in enumerate(rows):
        y = ROW_PX * (i + 1) + 6
        status = span.status.status_code.name
        x0, x1 = axis.x(span.start_time), axis.x(span.end_time)
        label = escape(span.name) + (" (open)" if status == "UNSET" else "")
        out.append(f'<text x="{6 + 12 * depth}" y="{y + 12}">{label}</text>')
        out.append(
            f'<rect x="{x0:.1f}" y="{y + 3}" width="{max(x1 - x0, 2):.1f}" height="{ROW_PX - 6}" '
            f'fill="{STATUS_COLOURS[status]}" rx="2"><title>{escape(span.name)}: {status}, '
            f"{_duration((span.end_time - span.start_time) / 1e9)}</title></rect>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> None:
    import logging

    logging.getLogger("continuum").setLevel(logging.WARNING)  # the task's own log lines
    naming = "aws" if "--naming" in argv and argv[argv.index("--naming") + 1] == "aws" else None
    paths = [a for a in argv if a.endswith(".svg")]
    spans = traced_trip(naming or "continuum")
    svg = waterfall_svg(spans, "Invocation" if naming else "invocation")
    Path(paths[0] if paths else "tracing-waterfall.svg").write_text(svg)
    print(f"trace_waterfall.spans: {len(spans)} spans")


if __name__ == "__main__":
    main(sys.argv[1:])
