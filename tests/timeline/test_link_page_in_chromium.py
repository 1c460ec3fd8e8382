"""A callback link's page on a phone (375 px wide, headless Chromium): nothing is wider than the
screen, the title, the deadline and both buttons are visible, and the page loads nothing else."""

from __future__ import annotations

from pathlib import Path

from tests.timeline.approval_page import PHONE, waiting_approval
from tests.timeline.browser import Browser, chromium

#: Every element's box, the page's width and what a person must see, measured in the page.
MEASURE = """(() => {
  const boxes = [...document.querySelectorAll("body *")].map((e) => e.getBoundingClientRect());
  const seen = (sel) => { const r = document.querySelector(sel).getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= window.innerWidth; };
  return {
    scrollWidth: document.documentElement.scrollWidth,
    widest: Math.max(...boxes.map((r) => r.right)),
    title: document.querySelector("h1").textContent,
    due: document.querySelector(".due").textContent,
    labels: [...document.querySelectorAll("dt")].map((e) => e.textContent),
    approve: seen("button.approve"),
    reject: seen("button.deny"),
    comment: seen("textarea"),
  };
})()"""


def test_the_link_page_fits_a_phone_with_its_buttons_visible(tmp_path: Path):
    chromium()
    with (
        waiting_approval() as url,
        Browser(tmp_path / "profile", width=PHONE[0], height=PHONE[1]) as browser,
    ):
        browser.open(url)
        page = browser.evaluate(MEASURE)
        shot = browser.screenshot(tmp_path / "phone.png")
        assert browser.violations() == []
        assert [u for u in browser.requests if not u.startswith(url)] == []
    assert page["scrollWidth"] <= PHONE[0]
    assert page["widest"] <= PHONE[0]
    assert page["title"] == "Expense of $42.00 by Ada Lovelace"
    assert "Answer by" in page["due"]
    assert "CET" in page["due"]
    assert page["labels"] == ["Employee", "Amount", "For"]
    assert page["approve"]
    assert page["reject"]
    assert page["comment"]
    assert shot.startswith(b"\x89PNG")
