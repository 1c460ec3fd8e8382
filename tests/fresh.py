"""A user's first run, in processes of their own: the suite's venv in a fresh interpreter, or
a user's machine with the wheel installed.

``fresh(*args)`` runs ``python ARGS`` in a new interpreter of the suite's own venv, which has
imported nothing yet (the suite's process has long imported every module by the time a test
runs, so a module that loads lazily passes there and may fail for a user): tests/first_run.

For the tests that run the docs, the samples and ``continuum init``'s project, the README's install
block runs once per session, as a user would run it: in a copy of this checkout's files (what a
fresh clone holds), ``python3 -m venv .venv``, then ``pip wheel`` and ``pip install`` of the wheel
with the venv's own pip, never upgraded. Everything after runs as a new process in that venv, with
nothing of this test process on its path: no editable install, no ``PYTHONPATH``, the dependency
versions the wheel's ranges give today.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The README's install block is the one that starts with this line.
INSTALL_BLOCK_START = "python3 -m venv .venv && . .venv/bin/activate"
#: Seconds one fresh process may take: an import of everything plus a sample's short run.
FRESH_TIMEOUT_S = 120
#: pip's patience for the index, per command (a cold cache downloads every dependency).
INSTALL_TIMEOUT_S = 900


@dataclass(frozen=True)
class Installed:
    """The copy of the checkout, and the venv the README's install block made in it."""

    checkout: Path
    venv: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    @property
    def wheel(self) -> Path:
        (wheel,) = (self.checkout / "dist").glob("continuum_lambda-*.whl")
        return wheel

    def env(self, **extra: str) -> dict[str, str]:
        """This process's environment less its Python and continuum settings, venv activated."""
        return activated(self.venv, **extra)

    def sh(
        self, script: str, cwd: Path | None = None, *, timeout: float = 300, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """Run ``script`` with bash (``set -euo pipefail``) in a fresh process, venv activated."""
        return sh(script, cwd or self.checkout, self.env(**env), timeout=timeout)


def activated(venv: Path, **extra: str) -> dict[str, str]:
    """The environment a shell has after ``. VENV/bin/activate``, without this test's settings."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PYTHON", "CONTINUUM_", "VIRTUAL_ENV", "PYTEST", "COV_"))
    }
    path = [p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != Path(sys.prefix, "bin")]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    env["VIRTUAL_ENV"] = str(venv)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def sh(
    script: str, cwd: Path, env: dict[str, str], *, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``bash -c script`` with errors on, its output captured."""
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def outside_env() -> dict[str, str]:
    """The environment before any venv: this process's, less its venv and Python settings."""
    env = activated(Path(sys.prefix))
    env["PATH"] = env["PATH"].split(os.pathsep, 1)[1]
    del env["VIRTUAL_ENV"]
    return env


def fenced_blocks(path: Path, language: str = "sh") -> list[tuple[int, str]]:
    """The ```language blocks of a markdown file: (the line of the fence, the block's text)."""
    blocks = []
    for match in re.finditer(rf"^```{language}\n(.*?)^```", path.read_text(), re.S | re.M):
        line = path.read_text().count("\n", 0, match.start()) + 1
        blocks.append((line, match.group(1)))
    return blocks


def copy_checkout(target: Path) -> Path:
    """The files a fresh clone of this checkout holds (its work tree as it is), in ``target``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # deleted but not yet committed: not in the tree
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def readme_install_block() -> str:
    """The README's install block, as a user would paste it."""
    blocks = [text for _, text in fenced_blocks(README) if text.startswith(INSTALL_BLOCK_START)]
    assert len(blocks) == 1, f"README.md: expected one block starting {INSTALL_BLOCK_START!r}"
    return blocks[0]


_installed: list[Installed] = []


def install_once(factory: pytest.TempPathFactory) -> Installed:
    """Run the README's install block in a copy of the checkout, once per test session."""
    if _installed:
        return _installed[0]
    checkout = copy_checkout(factory.mktemp("clone") / "continuum")
    result = sh(readme_install_block(), checkout, outside_env(), timeout=INSTALL_TIMEOUT_S)
    assert result.returncode == 0, f"README's install block failed:\n{result.stdout}{result.stderr}"
    _installed.append(Installed(checkout, checkout / ".venv"))
    return _installed[0]


def fresh(*args: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in a new interpreter of the suite's venv, from the repository root (so
    that the samples import)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=FRESH_TIMEOUT_S, check=False,
    )  # fmt: skip


def fresh_program(source: str) -> subprocess.CompletedProcess[str]:
    """A program's source run by :func:`fresh`."""
    return fresh("-c", textwrap.dedent(source))


def succeeded(result: subprocess.CompletedProcess[str]) -> str:
    """The process's output, once it is known to have exited 0."""
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result.stdout
