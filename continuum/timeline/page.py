"""One self-contained HTML page: the stylesheet, the script and the data inline, nothing else.

The page makes no request of its own: its Content-Security-Policy allows no source at all but
its one stylesheet and its one script, named by their SHA-256 (``default-src 'none'``), so
even a value in the data that looked like markup could not run. The data is JSON in a
``<script type="application/json">`` block, with ``<``, ``>`` and ``&`` written as ``\\u003c``
and the like: no state can close the block (``</script>``) or open a comment in it.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from continuum._ops.inspection import TaskView
from continuum.timeline.model import timeline_data

#: What may be posted from a page: nothing from a file, the dev server's own forms when served.
FORM_ACTION_FILE = "'none'"
FORM_ACTION_SERVED = "'self'"


@dataclass(frozen=True)
class Served:
    """What a page served by the dev server needs for its buttons.

    Attributes:
        token: the server's token, sent back with every form (cross-site requests lack it).
        base: the task's path on the server (the forms post to ``{base}/callback`` etc.).
        list: the path of the task list.
        answers: the kinds of wait the page has a form for, each with what answering it is
            called (the forms post to ``{base}/{kind}``).
    """

    token: str
    base: str
    list: str = "/"
    answers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Notice:
    """A line at the top of the page: what an action did (``ok``) or why it did not
    (``error``); after an error, the form of ``action`` is filled with what was sent, to fix.
    """

    kind: str
    text: str
    action: str | None = None
    fields: dict[str, str] = field(default_factory=dict)


def timeline_page(
    view: TaskView, *, served: Served | None = None, notice: Notice | None = None
) -> str:
    """The timeline of ``view`` as one HTML page (``continuum inspect TASK_ID --html FILE``).

    Example:
        >>> from continuum._ops.inspection import inspect_task  # doctest: +SKIP
        >>> page = timeline_page(inspect_task(client.records, "tides-1"))  # doctest: +SKIP
        >>> Path("tides-1.html").write_text(page)  # doctest: +SKIP
    """
    data: dict[str, Any] = {
        "timeline": timeline_data(view),
        "server": None if served is None else dataclasses.asdict(served),
        "notice": None if notice is None else dataclasses.asdict(notice),
    }
    return document(
        title=f"{view.task_id} · {view.status.value} · continuum",
        body='<main id="app"></main>\n'
        f'<script type="application/json" id="timeline-data">{script_json(data)}</script>\n'
        f"<script>{asset('timeline.js')}</script>",
        scripts=[asset("timeline.js")],
        form_action=FORM_ACTION_FILE if served is None else FORM_ACTION_SERVED,
        noscript="This page draws the timeline with JavaScript; "
        "`continuum inspect TASK_ID` prints it as text.",
    )


def document(
    *,
    title: str,
    body: str,
    scripts: list[str],
    form_action: str,
    noscript: str = "",
    refresh_s: int | None = None,
) -> str:
    """An HTML page with the shared stylesheet and a policy that allows only ``scripts``;
    with ``refresh_s``, one that reloads itself that often."""
    style = asset("timeline.css")
    csp = policy(style, scripts, form_action)
    refresh = f'<meta http-equiv="refresh" content="{int(refresh_s)}">\n' if refresh_s else ""
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        + refresh
        + '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n"
        f"<style>{style}</style>\n</head><body>\n"
        + (f"<noscript>{html.escape(noscript)}</noscript>\n" if noscript else "")
        + f"{body}\n</body></html>\n"
    )


def policy(style: str, scripts: list[str], form_action: str) -> str:
    """The Content-Security-Policy: nothing may load, only this style and these scripts run."""
    script_src = " ".join(_sha256(s) for s in scripts) or "'none'"
    return (
        f"default-src 'none'; style-src {_sha256(style)}; script-src {script_src}; "
        f"img-src data:; form-action {form_action}; base-uri 'none'"
    )


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe inside a ``<script>`` element (and still JSON)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


@cache
def asset(name: str) -> str:
    """A file of the page (package data)."""
    return resources.files("continuum.timeline").joinpath(name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
    return f"'sha256-{digest}'"
