"""The tests' environment decides nothing for users: no tool installed in it narrows a range
that the package declares, so the suite runs on the newest versions a user's install gets.

A dev tool that pins, say, pydantic to one minor would hold the whole suite on that minor while
users get the next one (SAM's translator did; it now lives in a venv of its own). The check
reads every installed distribution's requirements on the package's own dependencies.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import Specifier
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
#: The extras a user installs; dev is the tests' own.
USER_EXTRAS = ("local", "pydantic-ai")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def package_ranges() -> tuple[str, dict[str, Version | None]]:
    """The package's distribution name, and each dependency's upper bound (None: none)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    texts = project["dependencies"] + [
        r for extra in USER_EXTRAS for r in project["optional-dependencies"][extra]
    ]
    bounds: dict[str, Version | None] = {}
    for text in texts:
        requirement = Requirement(text)
        name = canonical(requirement.name)
        bounds.setdefault(name, None)
        for cap in map(ceiling, requirement.specifier):
            if cap is not None and (bounds[name] is None or cap < bounds[name]):
                bounds[name] = cap
    return canonical(project["name"]), bounds


def ceiling(specifier: Specifier) -> Version | None:
    """The version a specifier stops below (None: it has no ceiling)."""
    operator, version = specifier.operator, specifier.version
    if operator in ("<", "<="):
        return Version(version)
    if operator in ("==", "===") and version.endswith(".*"):
        return bump(version[:-2].split("."))
    if operator in ("==", "==="):
        return Version(version)
    if operator == "~=":
        return bump(version.split(".")[:-1])
    return None


def next_major(cap: Version) -> bool:
    """``<2``, ``<2.0.0``: a cap at a major version, which no release of the package promises
    to pass either (boto3 2 does not exist)."""
    return cap.release[1:] == (0,) * (len(cap.release) - 1)


def bump(parts: list[str]) -> Version:
    """The first version after every one that starts with ``parts``: 2.13 -> 2.14."""
    return Version(".".join([*parts[:-1], str(int(parts[-1]) + 1)]))


def test_no_installed_distribution_narrows_a_range_the_package_declares() -> None:
    own, bounds = package_ranges()
    narrowing = []
    for distribution in metadata.distributions():
        name = canonical(distribution.metadata["Name"])
        if name == own:
            continue
        for text in distribution.requires or []:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue  # an extra of that distribution, or another platform's
            dependency = canonical(requirement.name)
            if dependency not in bounds:
                continue
            ours = bounds[dependency]
            for cap in map(ceiling, requirement.specifier):
                if cap is not None and (ours is None or cap < ours) and not next_major(cap):
                    narrowing.append(f"{name} requires {requirement} (the package: {ours})")
    assert narrowing == [], (
        "installed in the tests' environment, these hold the suite below versions users get; "
        "move the tool to a venv of its own (as `make sam-tools` does) or uninstall it"
    )
