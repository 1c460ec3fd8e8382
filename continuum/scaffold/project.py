"""``continuum init``: a small project of your own, ready for ``sam build`` and ``pytest``.

The project (``<module>`` is the name in snake case)::

    src/<module>.py        the app, a state model, a step and a task
    src/handlers.py        the worker and dead-letter entry points the template names
    src/requirements.txt   what SAM's Python builder installs beside src/: continuum, yours
    template.yaml          the stack (render_template("project")), CodeUri: src/
    tests/test_<module>.py pytest tests of the task, in memory (continuum.testing's runner,
                           fixtures and replay check)
    pyproject.toml         pytest's settings: ``pytest`` finds src/ and the app under test
    README.md              the commands, from a local run to `sam deploy --guided`
    .gitignore
"""

from __future__ import annotations

import json
import keyword
import sys
from importlib import metadata
from pathlib import Path

from continuum.errors import ConfigurationError
from continuum.scaffold.render import fill, load
from continuum.scaffold.template import NAME, render_template

#: Module names a project's task module may not take: it would hide the package of that name.
RESERVED_MODULES = frozenset({"continuum", "handlers", "tests", "test", "conftest"})


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


def continuum_requirement() -> str:
    """The requirement for this continuum, as ``sam build``'s pip must read it.

    The project called ``continuum`` on PyPI is another one (a PyTorch library), so a bare
    name or version could package it instead. Installed from a directory, a wheel or a VCS
    (pip's ``direct_url.json``), the line points there; installed from an index, it pins the
    version and says to install from that index.
    """
    # A checkout's own egg-info may come first on sys.path: prefer what pip recorded.
    found = list(metadata.distributions(name="continuum-lambda"))
    if not found:  # running from a source tree that is not installed
        return f"continuum-lambda @ {Path(__file__).resolve().parents[2].as_uri()}"
    direct = next(filter(None, (d.read_text("direct_url.json") for d in found)), None)
    dist = found[0]
    if direct:
        origin = json.loads(direct)
        url, vcs = origin["url"], origin.get("vcs_info")
        if vcs:
            url = f"{vcs['vcs']}+{url}@{vcs['commit_id']}"
        return f"continuum-lambda @ {url}"
    return (
        "# PyPI's 'continuum' is another project: have pip read the index you installed\n"
        "# continuum from (e.g. PIP_INDEX_URL=... sam build), or point at a wheel instead.\n"
        f"continuum-lambda=={dist.version}"
    )


def project_files(name: str) -> dict[str, str]:
    """Relative path -> text of each file of the project ``name``."""
    module = module_name(name)
    values = {"name": name, "module": module}
    return {
        f"src/{module}.py": fill(load("task.py.tmpl"), {"name": name}),
        "src/handlers.py": fill(load("handlers.py.tmpl"), {"module": module}),
        "src/requirements.txt": fill(
            load("requirements.txt.tmpl"), {"continuum": continuum_requirement()}
        ),
        "template.yaml": render_template("project", name=name, app=f"{module}:app"),
        f"tests/test_{module}.py": fill(load("test_task.py.tmpl"), {"module": module}),
        "pyproject.toml": fill(load("pyproject.toml.tmpl"), {"module": module}),
        "README.md": fill(load("README.md.tmpl"), values),
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
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written
