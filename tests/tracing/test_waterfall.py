"""The picture of docs/tracing.md is drawn from a real task's exported spans."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from benchmarks.trace_waterfall import traced_trip, waterfall_svg


@pytest.mark.parametrize("naming", ["continuum", "aws"])
def test_the_waterfall_draws_a_bar_and_a_name_for_each_span_of_the_trace(naming):
    spans = traced_trip(naming)
    assert len({s.context.trace_id for s in spans}) == 1
    svg = ET.fromstring(waterfall_svg(spans, "Invocation" if naming == "aws" else "invocation"))
    bars = svg.findall("{http://www.w3.org/2000/svg}rect")[1:]  # after the background
    assert len(bars) == len(spans)
    titles = [bar.find("{http://www.w3.org/2000/svg}title") for bar in bars]
    assert sorted(t.text.split(":")[0] for t in titles if t is not None) == sorted(
        s.name for s in spans
    )
