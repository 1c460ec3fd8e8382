"""``continuum init``'s project installs and passes its tests on another machine.

Written by the installed wheel's ``continuum init``, moved to another directory (nothing of the
machine that wrote it left to point at), installed in a fresh venv with that venv's own pip by
the line ``init`` printed, then tested with ``pytest``, as the project's README says.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.fresh import INSTALL_TIMEOUT_S, Installed, activated, outside_env, sh

pytestmark = pytest.mark.slow

NAME = "my-agent"


def printed_lines(stdout: str) -> list[str]:
    """The commands ``continuum init`` prints under "Next", without their comments."""
    commands = stdout.split("\nNext, in ", 1)[1].splitlines()[1:]
    return [line.split("  #", 1)[0].strip() for line in commands]


def test_the_init_projects_printed_install_line_works_on_another_machine(
    installed: Installed, tmp_path: Path
) -> None:
    made = installed.sh(f"continuum init {NAME}", tmp_path / "..", timeout=60)
    assert made.returncode == 0, made.stderr
    written = tmp_path.parent / NAME
    elsewhere = tmp_path / "another-machine" / NAME
    shutil.move(written, elsewhere)

    venv, install, test = printed_lines(made.stdout)[:3]
    assert venv == "python3 -m venv .venv && . .venv/bin/activate"
    assert install.startswith("pip install -r src/requirements.txt")
    # The venv's own pip, as the Python on the PATH ships it: no upgrade.
    result = sh(f"{venv}\npip --version\n{install}\n{test}", elsewhere, outside_env(),
                timeout=INSTALL_TIMEOUT_S)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
    own = sh("python -c 'import continuum, sys; print(continuum.__file__)'", elsewhere,
             activated(elsewhere / ".venv"))  # fmt: skip
    assert own.stdout.startswith(str(elsewhere / ".venv")), own.stdout + own.stderr
    assert sys.prefix not in own.stdout
