"""``continuum init``'s project installs and passes its tests on another machine.

Written by the installed wheel's ``continuum init``, moved to another directory (nothing of the
machine that wrote it left to point at), installed in a fresh venv with that venv's own pip by
the line ``init`` printed, then tested with ``pytest``, as the project's README says.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fresh import INSTALL_TIMEOUT_S, Installed, activated, outside_env, sh

pytestmark = pytest.mark.slow

NAME = "my-agent"


def printed_lines(stdout: str) -> list[str]:
    """The commands ``continuum init`` prints under "Next", without their comments."""
    commands = stdout.split("\nNext, in ", 1)[1].splitlines()[1:]
    return [line.split("  #", 1)[0].strip() for line in commands]


@pytest.fixture(scope="module")
def moved(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The project the wheel's ``continuum init`` wrote, moved elsewhere; what init printed."""
    here = tmp_path_factory.mktemp("init")
    made = installed.sh(f"continuum init {NAME}", here, timeout=60)
    assert made.returncode == 0, made.stderr
    elsewhere = tmp_path_factory.mktemp("another-machine") / NAME
    shutil.move(here / NAME, elsewhere)
    return elsewhere, made.stdout


def test_the_init_projects_printed_install_line_works_on_another_machine(
    moved: tuple[Path, str],
) -> None:
    elsewhere, printed = moved
    venv, install, test = printed_lines(printed)[:3]
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


def python312() -> str | None:
    """A Python 3.12, the functions' runtime, which SAM's Python builder needs on the PATH."""
    found = [shutil.which("python3.12"), *map(str, Path.home().glob(".pyenv/versions/3.12*/bin"))]
    for candidate in filter(None, found):
        exe = candidate if candidate.endswith("python3.12") else f"{candidate}/python3.12"
        ran = subprocess.run([exe, "--version"], capture_output=True, check=False)
        if ran.returncode == 0:
            return exe
    return None


#: What ``sam build`` runs for a function without BuildMethod: aws-lambda-builders' Python
#: workflow on the function's CodeUri, for its runtime and architecture (SAM's own call).
SAM_PYTHON_BUILD = """
import sys, tempfile
from aws_lambda_builders.builder import LambdaBuilder

source, artifacts, runtime, architecture = sys.argv[1:]
builder = LambdaBuilder(language="python", dependency_manager="pip", application_framework=None)
with tempfile.TemporaryDirectory() as scratch:
    builder.build(source, artifacts, scratch, manifest_path=f"{source}/requirements.txt",
                  runtime=runtime, architecture=architecture)
"""


def test_sams_python_builder_packages_the_moved_project_with_continuum(
    moved: tuple[Path, str], tmp_path: Path
) -> None:
    # The SAM CLI is no dependency of continuum: its Python builder (the library sam build
    # runs for this template's functions) is installed here in a venv of the runtime's Python.
    exe = python312()
    if exe is None:
        pytest.skip("no python3.12 here: SAM's Python builder needs the functions' runtime")
    elsewhere, _ = moved
    template = yaml_functions(elsewhere / "template.yaml")
    builder = tmp_path / "builder"
    made = sh(f"{exe} -m venv {builder} && {builder}/bin/pip install -q aws-lambda-builders",
              tmp_path, outside_env(), timeout=INSTALL_TIMEOUT_S)  # fmt: skip
    assert made.returncode == 0, made.stderr
    (tmp_path / "build.py").write_text(SAM_PYTHON_BUILD)
    artifacts = tmp_path / "artifacts"
    env = outside_env()
    env["PATH"] = f"{Path(exe).parent}:{env['PATH']}"
    built = subprocess.run(
        [builder / "bin/python", tmp_path / "build.py", elsewhere / template["CodeUri"],
         artifacts, template["Runtime"], template["Architectures"][0]],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
        check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    assert (artifacts / "continuum" / "cli" / "__init__.py").is_file()
    assert (artifacts / "handlers.py").is_file()
    (info,) = artifacts.glob("continuum_lambda-*.dist-info")
    assert info.name == f"{wheel_of(elsewhere).name.split('-py3')[0]}.dist-info"
    machine = {"arm64": "aarch64", "x86_64": "x86_64"}[template["Architectures"][0]]
    assert list(artifacts.glob(f"pydantic_core/*{machine}-linux-gnu.so"))


def wheel_of(project: Path) -> Path:
    (wheel,) = (project / "src" / "wheels").glob("continuum_lambda-*.whl")
    return wheel


def yaml_functions(template: Path) -> dict[str, Any]:
    """The template's Globals.Function (CodeUri, Runtime, Architectures)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    # CloudFormation's short tags (!Ref, !Sub, ...): their values do not matter here.
    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    loaded: dict[str, Any] = yaml.load(template.read_text(), Loader=Loader)
    return dict(loaded["Globals"]["Function"])
