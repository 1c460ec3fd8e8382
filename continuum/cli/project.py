"""continuum init: a new project of your own, ready for continuum dev, pytest and sam build."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from continuum.cli.common import CliError


def register(commands: Any) -> None:
    """Add init to the ``continuum`` command."""
    init = commands.add_parser(
        "init",
        help="write a new project: a task module, its tests, a SAM template, a README",
        description="Write a new project into NAME/ (or --path): src/MODULE.py with an app and "
        "a task, src/handlers.py, src/requirements.txt, template.yaml (the stack, built by "
        "SAM's standard Python builder), tests/ and a README with the commands.",
    )
    init.add_argument("name", metavar="NAME", help="the project's name, e.g. my-agent")
    init.add_argument("--path", default=None, help="the directory to write (default: ./NAME)")
    init.add_argument(
        "--force", action="store_true", help="write into a non-empty directory, replacing "
        "the files of the same names and leaving the others",
    )  # fmt: skip
    init.set_defaults(func=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    """``continuum init NAME``: write the project and say what to run next."""
    from continuum.scaffold import init_project
    from continuum.scaffold.project import module_name

    path = Path(args.path if args.path is not None else args.name)
    try:
        module = module_name(args.name)
        written = init_project(path, args.name, force=args.force)
    except OSError as exc:
        raise CliError(f"cannot write the project into {str(path)!r}: {exc}") from None
    for file in written:
        print(f"wrote {file}")
    print(
        f"\nNext, in {path}:\n"
        f"  python3 -m venv .venv && . .venv/bin/activate\n"
        f'  pip install -r src/requirements.txt "continuum-lambda[local]" pytest\n'
        f"  pytest                                # the tests, in memory\n"
        f"  cd src && continuum dev {module}:app   # a local stack; it prints what to export\n"
        f"  sam build && sam deploy --guided      # from {path}: your own stack on AWS"
    )
    return 0
