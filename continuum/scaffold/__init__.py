"""Scaffolding: the SAM template in its two flavors, and ``continuum init``'s project.

One source makes both templates, so that they cannot drift: this repository's
``infra/template.yaml`` (``render_template("reference")``, written by ``infra/gen_template.py``)
and the ``template.yaml`` of a project of your own (``init_project``).

Example:
    >>> from pathlib import Path
    >>> written = init_project(Path("tides"), "tides")  # doctest: +SKIP
    >>> [str(p) for p in written][:2]  # doctest: +SKIP
    ['tides/src/tides.py', 'tides/src/handlers.py']

May import: errors, _base, backends, _record, _define, _steps, _waits, _fanout, _turn, _worker,
_ops, _app, _local, continuum.
"""

from continuum.scaffold.project import init_project
from continuum.scaffold.render import Flavor
from continuum.scaffold.template import render_template

__all__ = ["Flavor", "init_project", "render_template"]
