"""``continuum init``: a small project of your own, ready for ``sam build`` and ``pytest``.

The project (``<module>`` is the name in snake case)::

    src/<module>.py        the app, a step and a task
    src/<module>_state.py  the task's state model (all ``continuum start`` imports)
    src/handlers.py        the worker and dead-letter entry points the template names
    src/requirements.txt   what SAM's Python builder installs beside src/: continuum, yours
    src/wheels/            continuum's wheel (on no index): requirements.txt finds it here
    template.yaml          the stack (render_template("project")), CodeUri: src/
    tests/test_<module>.py pytest tests of the task, in memory (continuum.testing's runner,
                           fixtures and replay check)
    pyproject.toml         pytest's settings: ``pytest`` finds src/ and the app under test
    README.md              the commands, from a local run to `sam deploy --guided`
    .gitignore
"""

from __future__ import annotations

import keyword
import sys
from pathlib import Path

from continuum.errors import ConfigurationError
from continuum.scaffold.render import fill, load
from continuum.scaffold.template import NAME, render_template
from continuum.scaffold.vendor import DISTRIBUTION, build_wheel, installed_version, wheel_name

#: Module names a project's task module may not take: it would hide the package of that name.
RESERVED_MODULES = frozenset({"continuum", "handlers", "tests", "test", "conftest"})
#: Where the project keeps continuum's wheel, relative to src/: inside src/, so that
#: ``sam build --use-container``, which mounts src/ alone, finds it too.
WHEELS = "wheels"


def module_name(name: str) -> str:
    """The task module's name for a project name: ``"my-tides"`` -> ``"my_tides"``.

    Raises:
        ConfigurationError: the name is not a stack name, or its module would hide another.
    """
    module = name.lower().replace("-", "_")
    if not NAME.fullmatch(name) or not module.isidentifier():
        raise ConfigurationError(
            f"cannot name a project {name!r}",
            hint="start with a letter; then letters, digits, '-' or '_' (63 at most)",
        )
    if keyword.iskeyword(module) or module in RESERVED_MODULES | sys.stdlib_module_names:
        raise ConfigurationError(
            f"cannot name a project {name!r}: its module {module!r} would hide another one",
            hint="choose a name of your own, such as 'tides' or 'word-count'",
        )
    return module


def continuum_requirements() -> str:
    """The lines of ``src/requirements.txt`` that give pip this continuum, from its vendored wheel.

    pip reads a ``--find-links`` path relative to the requirements file, so the same lines find
    ``src/wheels/`` from the project's root, from ``src/`` and in ``sam build``'s pip; the
    version pin keeps any other index's ``continuum-lambda`` out.
    """
    return f"--find-links {WHEELS}\n{DISTRIBUTION}=={installed_version()}"


#: The README's table of the project's files: (path, what it is), ``{module}`` filled in.
_FILES = (
    ("src/{module}.py", "your app: steps and tasks"),
    (
        "src/{module}_state.py",
        "their state models (`continuum start` imports only this to check input)",
    ),
    ("src/handlers.py", "the Lambda entry points template.yaml names"),
    (
        "src/requirements.txt",
        "what `sam build` installs beside src/: continuum and your dependencies",
    ),
    (f"src/{WHEELS}/", "continuum-lambda's wheel (on no index): requirements.txt finds it there"),
    ("template.yaml", "the stack: state bucket, queues, worker, dead-letter function, alarms"),
    ("tests/test_{module}.py", "tests of your tasks, in memory (no AWS account, no moto)"),
    ("pyproject.toml", "pytest's settings (it finds src/, and the app continuum's fixtures run)"),
)


def files_table(module: str) -> str:
    """The README's table of files, its second column aligned for this module's name."""
    rows = [(path.format(module=module), what) for path, what in _FILES]
    width = max(len(path) for path, _ in rows) + 3
    return "\n".join(f"{path:<{width}}{what}" for path, what in rows)


def project_files(name: str) -> dict[str, str | bytes]:
    """Relative path -> text (or bytes, for continuum's wheel) of each file of the project."""
    module = module_name(name)
    values = {"name": name, "module": module}
    return {
        f"src/{module}.py": fill(load("task.py.tmpl"), values),
        f"src/{module}_state.py": fill(load("state.py.tmpl"), {"name": name}),
        "src/handlers.py": fill(load("handlers.py.tmpl"), {"module": module}),
        "src/requirements.txt": fill(
            load("requirements.txt.tmpl"), {"continuum": continuum_requirements()}
        ),
        f"src/{WHEELS}/{wheel_name()}": build_wheel(),
        "template.yaml": render_template("project", name=name, app=f"{module}:app"),
        f"tests/test_{module}.py": fill(load("test_task.py.tmpl"), {"module": module}),
        "pyproject.toml": fill(load("pyproject.toml.tmpl"), {"module": module}),
        "README.md": fill(load("README.md.tmpl"), {**values, "files": files_table(module)}),
        ".gitignore": load("gitignore.tmpl"),
    }


def init_project(path: Path, name: str, *, force: bool = False) -> list[Path]:
    """Write a new project named ``name`` into the directory ``path``.

    Args:
        path: the project's directory; created if missing. It must be empty unless ``force``.
        name: the project's name (letters, digits, ``-``, ``_``); its task module is the
            name in snake case, ``src/<module>.py``.
        force: write into a non-empty directory, replacing the files of the same names and
            leaving every other file as it is.

    Returns:
        The paths written, in the order written.

    Raises:
        ConfigurationError: the name cannot be used, ``path`` is a file, or ``path`` is a
            directory that is not empty and ``force`` is false.

    Example:
        >>> init_project(Path("tides"), "tides")  # doctest: +SKIP
        [PosixPath('tides/src/tides.py'), PosixPath('tides/src/handlers.py'), ...]
    """
    files = project_files(name)
    if path.exists() and not path.is_dir():
        raise ConfigurationError(f"{str(path)!r} is a file, not a directory")
    if path.is_dir() and any(path.iterdir()) and not force:
        raise ConfigurationError(
            f"{str(path)!r} is not empty: continuum init writes a new project",
            hint="choose a new or empty directory, or pass --force (force=True) to overwrite "
            f"{', '.join(sorted(files))} there",
        )
    written = []
    for relative, text in files.items():
        target = path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            target.write_bytes(text)
        else:
            target.write_text(text, encoding="utf-8")
        written.append(target)
    return written
