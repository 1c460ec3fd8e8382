"""The docs' "Testing your tasks" page, as files a test can run."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def blocks(language: str) -> list[str]:
    """The page's code blocks in ``language``, in order."""
    text = PAGE.read_text()
    assert text.startswith("# Testing your tasks\n"), f"{PAGE} is not the 'Testing your tasks' page"
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)
