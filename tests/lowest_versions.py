"""The lowest versions pyproject.toml's ranges allow, as a pip constraints file.

    python tests/lowest_versions.py EXTRA...   # e.g. local, or local pydantic-ai

For the package's dependencies and those of the extras named, each ``>=`` bound becomes ``==``
(the highest bound, where several sections name the same package), so ``make oldest`` installs
the oldest end of every range and runs the key suites on it. botocore is pinned with boto3:
they are released in lockstep, and boto3's own range would pull the newest botocore of its minor.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A requirement: its name, its extras, its specifiers (no markers or URLs are used here).
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")
#: Released together, at the same version numbers.
LOCKSTEP = {"boto3": "botocore"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lowest(extras: list[str]) -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    unknown = [extra for extra in extras if extra not in optional]
    if unknown:
        raise SystemExit(f"pyproject.toml has no extra {', '.join(unknown)}")
    floors: dict[str, tuple[int, ...]] = {}
    texts: dict[str, str] = {}
    for requirement in project["dependencies"] + [r for e in extras for r in optional[e]]:
        match = REQUIREMENT.match(requirement)
        if match is None:
            raise SystemExit(f"cannot read the requirement {requirement!r}")
        name, _extras, specifiers = match.groups()
        name = canonical(name)
        if name == canonical(project["name"]):
            continue  # the package's own extras, named by the sections above
        for specifier in filter(None, (s.strip() for s in specifiers.split(","))):
            if specifier.startswith(">="):
                version = specifier[2:].strip()
                key = tuple(int(part) for part in version.split("."))
                if key > floors.get(name, ()):
                    floors[name], texts[name] = key, version
    for leader, follower in LOCKSTEP.items():
        if leader in texts:
            texts[follower] = texts[leader]
    return dict(sorted(texts.items()))


if __name__ == "__main__":
    for name, version in lowest(sys.argv[1:]).items():
        print(f"{name}=={version}")
