"""What a callback link shows the person who answers it: who asks, what, until when, and the
Approve / Deny buttons with a comment.

A request (``ctx.create_callback(..., request=...)``) is JSON. One of this shape reads as a page:

- ``title``: the page's heading (one line: "Refund order 1042");
- ``summary``: a paragraph under it, what the person decides;
- ``fields``: named values, shown as a list of labels and values (values may be lists or
  objects, shown nested): an object (the record keeps JSON objects with sorted keys, so its
  labels show sorted) or a list of ``[label, value]`` pairs, shown in their order;
- ``asked_by``: who asks, beside the task's name and id;
- ``timezone``: an IANA zone ("Europe/Paris") the deadline is shown in, beside UTC.

Its other keys (a digest, ids, ``expects`` and ``answers``) are for machines and stay out of
sight. Any other JSON reads as text: an object as a list of its keys and values, a string as a
paragraph. Every string is escaped (a request's strings are user data). The deadline is the
callback's own (its timeout or heartbeat deadline), never one the request claims. The page is
plain HTML and one stylesheet, so that a phone and a mail client's preview show it alike.
"""

from __future__ import annotations

import hashlib
import html
from base64 import b64encode
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: The keys of a request that make it a page; any other key of such a request is not shown.
SHAPE_KEYS = ("title", "summary", "fields", "asked_by")
#: Keys of any request object that are for machines (see ``docs/waiting.md``).
MACHINE_KEYS = ("expects", "answers")
DEFAULT_TITLE = "A request for you"

STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:40rem;margin:0 auto;padding:1rem;"
    "color:#222;line-height:1.45;overflow-wrap:anywhere}"
    "h1{font-size:1.5rem;line-height:1.25;margin:.5rem 0}"
    ".who{color:#555;font-size:.95rem;margin:0 0 1rem}"
    ".due{background:#fff8c5;border-left:4px solid #d4a72c;padding:.5rem .75rem;margin:1rem 0}"
    "dl{display:grid;grid-template-columns:minmax(6rem,max-content) 1fr;gap:.35rem 1rem;"
    "margin:1rem 0}dt{font-weight:600;color:#555}dd{margin:0;min-width:0}"
    "dd dl{margin:0}ul{margin:0;padding-left:1.2rem}"
    "@media (max-width:30rem){dl{grid-template-columns:1fr;gap:0}dd{margin-bottom:.6rem}}"
    "label{display:block;font-weight:600;margin:1rem 0 .25rem}"
    "textarea{width:100%;box-sizing:border-box;font:inherit;padding:.4rem}"
    ".buttons{display:flex;flex-wrap:wrap;gap:.5rem;margin-top:.75rem}"
    "button{flex:1 1 8rem;font-size:1.05rem;padding:.7rem 1rem;border:0;border-radius:6px}"
    ".approve{background:#1a7f37;color:#fff}.deny{background:#cf222e;color:#fff}"
)
STYLE_HASH = b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()


def callback_page(
    request: Any,
    *,
    task_name: str,
    task_id: str,
    deadline: datetime | None,
    now: datetime,
) -> str:
    """The page of a callback that asks ``request``, with its answer form."""
    shaped = isinstance(request, dict) and any(key in request for key in SHAPE_KEYS)
    asks = request if isinstance(request, dict) else {}
    title = str(asks.get("title") or DEFAULT_TITLE) if shaped else DEFAULT_TITLE
    body = (
        f"<h1>{_text(title)}</h1>"
        + _who(asks.get("asked_by") if shaped else None, task_name, task_id)
        + _due(deadline, now, asks.get("timezone"))
        + (_shaped(asks) if shaped else _plain(request))
        + _FORM
    )
    return document(title, body)


def message_page(text: str) -> str:
    return document(DEFAULT_TITLE, f"<p>{_text(text)}</p>")


def document(title: str, body: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_text(title)}</title><style>{STYLE}</style></head>"
        f"<body><main>{body}</main></body></html>"
    )


_FORM = (
    '<form method="post">'
    '<label for="comment">Comment (optional; the task reads it)</label>'
    '<textarea id="comment" name="comment" rows="3" maxlength="2000"></textarea>'
    '<div class="buttons">'
    '<button class="approve" name="decision" value="approve">Approve</button>'
    '<button class="deny" name="decision" value="deny">Reject</button>'
    "</div></form>"
)


def _who(asked_by: Any, task_name: str, task_id: str) -> str:
    task = f"task <strong>{_text(task_name)}</strong> (<code>{_text(task_id)}</code>)"
    if asked_by:
        return f'<p class="who">Asked by <strong>{_text(asked_by)}</strong>, for {task}</p>'
    return f'<p class="who">Asked by {task}</p>'


def _due(deadline: datetime | None, now: datetime, timezone: Any) -> str:
    if deadline is None:
        return '<p class="due">Answer when you can: this request has no deadline.</p>'
    shown = _when(deadline.astimezone(UTC))
    zone = _zone(timezone)
    if zone is not None:
        local = deadline.astimezone(zone)
        if local.date() == deadline.astimezone(UTC).date():
            shown = f"{deadline.astimezone(UTC):%H:%M} UTC"
        shown = f"{_when(local)} ({shown})"
    stamp = deadline.astimezone(UTC).isoformat()
    return (
        f'<p class="due">Answer by <time datetime="{_text(stamp)}">{_text(shown)}</time>, '
        f"{_text(_until(deadline - now))}.</p>"
    )


def _when(moment: datetime) -> str:
    return f"{moment:%A} {moment.day} {moment:%B %Y, %H:%M} {moment.tzname()}"


def _zone(name: Any) -> ZoneInfo | None:
    if not isinstance(name, str) or not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):  # a zone the request names wrongly: UTC alone
        return None


def _until(left: timedelta) -> str:
    seconds = left.total_seconds()
    if seconds < 60:
        return "in less than a minute"
    if seconds >= 1.5 * 86400:
        n, unit = round(seconds / 86400), "day"
    elif seconds >= 59 * 60:  # a deadline an hour away, read a moment later, is still "1 hour"
        n, unit = round(seconds / 3600), "hour"
    else:
        n, unit = round(seconds / 60), "minute"
    return f"in {n} {unit}{'' if n == 1 else 's'}"


def _shaped(request: dict[str, Any]) -> str:
    summary = request.get("summary")
    fields = request.get("fields")
    parts = [] if summary in (None, "") else [f"<p>{_value(summary)}</p>"]
    if isinstance(fields, dict) and fields:
        parts.append(_definitions(fields.items()))
    elif isinstance(fields, list) and fields and all(_is_pair(f) for f in fields):
        parts.append(_definitions(fields))  # [label, value] pairs keep their order
    elif fields not in (None, "", [], {}):
        parts.append(f"<p>{_value(fields)}</p>")
    return "".join(parts)


def _plain(request: Any) -> str:
    if request is None:
        return ""
    if isinstance(request, dict):
        shown = {k: v for k, v in request.items() if k not in MACHINE_KEYS}
        return _definitions(shown.items()) if shown else ""
    if isinstance(request, list):
        return _value(request)
    return f"<p>{_value(request)}</p>"


def _is_pair(item: Any) -> bool:
    return isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)


def _definitions(pairs: Iterable[Any]) -> str:
    rows = "".join(f"<dt>{_text(key)}</dt><dd>{_value(v)}</dd>" for key, v in pairs)
    return f"<dl>{rows}</dl>"


def _value(value: Any) -> str:
    if value is None or value == [] or value == {}:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return _definitions(value.items())
    if isinstance(value, list):
        return "<ul>" + "".join(f"<li>{_value(item)}</li>" for item in value) + "</ul>"
    return _text(value)


def _text(value: Any) -> str:
    return html.escape(str(value), quote=True)
