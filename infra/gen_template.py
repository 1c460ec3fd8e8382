"""Write infra/template.yaml: the "reference" flavor of continuum's one SAM template source.

The source is continuum/scaffold/templates/template.yaml.tmpl; `continuum init` writes the
"project" flavor of the same text for a project of your own, so the two cannot drift. Run
`make template` (or `python infra/gen_template.py`) after changing the source; `--check` exits 1
when infra/template.yaml is out of date (tests/test_template.py checks the same).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "infra" / "template.yaml"
sys.path.insert(0, str(ROOT))  # this checkout's continuum, whatever is installed

from continuum.scaffold import render_template  # noqa: E402 - after the path is set


def main(argv: list[str]) -> int:
    text = render_template("reference")
    if "--check" in argv:
        if TEMPLATE.exists() and TEMPLATE.read_text() == text:
            return 0
        print(f"infra/template.yaml is out of date: run {sys.argv[0]}", file=sys.stderr)
        return 1
    TEMPLATE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
