"""Headless Chromium (Debian's package, which .ci/run installs), driven from the standard library.

:class:`Browser` speaks the Chrome DevTools Protocol over ``--remote-debugging-pipe``: JSON
messages ended by a NUL byte, commands on the browser's file descriptor 3 and answers and
events on 4, so no websocket client is needed. It opens a page, runs JavaScript in it
(``evaluate``), clicks, waits for the next page, takes screenshots, and records every request
the page made and every Content-Security-Policy violation.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from continuum._base.clock import real_monotonic

#: The machine's flags for headless Chromium (its background requests would be refused here).
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--font-render-hinting=none",
]
#: A command the browser does not answer in this long is a failure, not a hang.
ANSWER_TIMEOUT_S = 20.0
#: Collects what the page's policy refused, from before the page's own script runs.
WATCH_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__violations.push(e.violatedDirective + " " + e.blockedURI));
"""


def chromium() -> str:
    """The path of Chromium, or skip the test saying how to get it."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium not installed: run .ci/run (it installs Debian's chromium)")
    return found


def chromium_command(profile: Path, *args: str) -> list[str]:
    return [chromium(), *FLAGS, f"--user-data-dir={profile}", *args]


class BrowserError(AssertionError):
    pass


class Browser:
    """One headless Chromium with one tab; a context manager."""

    def __init__(self, profile: Path, *, width: int = 1400, height: int = 900) -> None:
        self.profile, self.width, self.height = profile, width, height
        self.events: list[dict[str, Any]] = []
        self.requests: list[str] = []
        self._next_id = 0
        self._buffer = b""

    def __enter__(self) -> Browser:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # Out of the way of 3 and 4, so that moving them there cannot clobber one another.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w)]
        os.close(to_browser_r)
        os.close(from_browser_w)

        def onto_3_and_4() -> None:
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self._stderr = open(self.profile.parent / "chromium.log", "wb")
        self.process = subprocess.Popen(
            chromium_command(self.profile, "--remote-debugging-pipe", "about:blank"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            close_fds=False,
            preexec_fn=onto_3_and_4,
        )
        for fd in high:
            os.close(fd)
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Network"):
            self.call(f"{domain}.enable", session=True)
        self.call("Page.setLifecycleEventsEnabled", session=True, enabled=True)
        self.call("Page.addScriptToEvaluateOnNewDocument", session=True, source=WATCH_VIOLATIONS)
        self._window(self.height)
        return self

    def __exit__(self, *_: object) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.call("Browser.close")
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._stderr.close()

    # -- what a test does ------------------------------------------------------------------------

    def open(self, url: str) -> None:
        """Go to ``url`` and wait until it loaded and its scripts ran."""
        self.events.clear()
        answer = self.call("Page.navigate", session=True, url=url)
        if answer.get("errorText"):
            raise BrowserError(f"{url}: {answer['errorText']}")
        if "loaderId" not in answer:  # the same document (a fragment): no new load
            return
        # This navigation's load, not a late one of the page before (a reload it had begun).
        loader = answer["loaderId"]
        self.wait_for_event(
            "Page.lifecycleEvent",
            lambda params: params["name"] == "load" and params["loaderId"] == loader,
        )
        # Its loadEventFired came just before: a later click waits for the next page's.
        self.events.clear()

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON values only)."""
        answer = self.call(
            "Runtime.evaluate",
            session=True,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        if "exceptionDetails" in answer:
            details = answer["exceptionDetails"]
            raise BrowserError(details.get("exception", {}).get("description") or str(details))
        return answer["result"].get("value")

    def submit(self, form_selector: str, **fields: str) -> None:
        """Fill a form's fields, click its button, and wait for the page it leads to."""
        self.events.clear()
        form, values = json.dumps(form_selector), json.dumps(fields)
        self.evaluate(
            f"(() => {{ const form = document.querySelector({form});"
            f" for (const [k, v] of Object.entries({values})) form.elements[k].value = v;"
            " form.querySelector('button').click(); })()"
        )
        self.wait_for_event("Page.loadEventFired")

    def screenshot(self, path: Path) -> bytes:
        """The whole page as a PNG, written to ``path``; the window keeps its size after."""
        height = self.evaluate("document.documentElement.scrollHeight")
        self._window(max(self.height, int(height)))
        try:
            data = base64.b64decode(self.call("Page.captureScreenshot", session=True)["data"])
        finally:
            self._window(self.height)
        path.write_bytes(data)
        return data

    def _window(self, height: int) -> None:
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=self.width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def violations(self) -> list[str]:
        return list(self.evaluate("window.__violations || []"))

    # -- the protocol ----------------------------------------------------------------------------

    def call(self, method: str, *, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))

    def wait_for_event(
        self, name: str, matches: Callable[[dict[str, Any]], bool] = lambda _: True
    ) -> dict[str, Any]:
        """The first event called ``name`` (whose params ``matches``), waiting for it."""
        while True:
            for event in self.events:
                if event["method"] == name and matches(event.get("params", {})):
                    self.events.remove(event)
                    return event
            self._read()

    def _read(self) -> dict[str, Any]:
        deadline = real_monotonic() + ANSWER_TIMEOUT_S
        while b"\0" not in self._buffer:
            left = deadline - real_monotonic()
            ready, _, _ = select.select([self._from_browser], [], [], max(0.0, left))
            if not ready:
                raise BrowserError(f"chromium did not answer in {ANSWER_TIMEOUT_S:.0f}s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError("chromium exited")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        if "method" in message:
            if message["method"] == "Network.requestWillBeSent":
                self.requests.append(message["params"]["request"]["url"])
            self.events.append(message)
        return message
