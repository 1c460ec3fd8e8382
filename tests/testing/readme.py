"""The README's "Testing your tasks" section, as files a test can run."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def blocks(language: str) -> list[str]:
    """The section's code blocks in ``language``, in order."""
    text = README.read_text()
    section = re.search(r"\n## Testing your tasks\n(.*?)\n## ", text, re.S)
    assert section is not None, "README.md has no 'Testing your tasks' section"
    return re.findall(rf"```{language}\n(.*?)```", section.group(1), re.S)
