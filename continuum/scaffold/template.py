"""The SAM template, in its two flavors, from one source: ``templates/template.yaml.tmpl``.

- ``reference``: this repository's ``infra/template.yaml``. ``sam build`` runs the makefile
  targets of ``infra/build.mk`` on the repository root (continuum/, handlers/, samples/), and
  the ``AppSpec`` parameter names the app.
- ``project``: the template ``continuum init`` writes for a project of your own. SAM's standard
  Python builder packages ``src/`` (your task module and ``handlers.py``) with what
  ``src/requirements.txt`` lists, continuum among it; the handlers import the app themselves.

Everything else (bucket, queues, roles, alarms, policies, outputs) is the same text in both.
"""

from __future__ import annotations

import re

from continuum.errors import ConfigurationError
from continuum.scaffold.render import FLAVORS, Flavor, fill, keep_flavor, load

#: A stack or project name: it heads the template's description and the project's README.
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,62}")
#: ``module:attribute`` of an app, as the reference template's ``AppSpec`` parameter allows it.
APP = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*")
#: The app the reference template runs unless ``AppSpec`` names another.
REFERENCE_APP = "samples.research_agent:app"


def render_template(flavor: Flavor, *, name: str = "continuum", app: str = REFERENCE_APP) -> str:
    """The SAM template of one flavor, as YAML text.

    Args:
        flavor: ``"reference"`` (this repository, makefile build) or ``"project"`` (a project
            of your own, standard Python build of ``src/``).
        name: the stack's name in its description.
        app: ``module:attribute`` of the app: the ``AppSpec`` default of the reference
            flavor; in the project flavor, the ``CONTINUUM_APP`` of the ``CliEnvironment``
            output (the functions import the app through ``handlers.py``).

    Returns:
        The template text, ending with a newline.

    Raises:
        ConfigurationError: an unknown flavor, or a name or app that the template cannot hold.

    Example:
        >>> text = render_template("project", name="tides", app="tides:app")
        >>> "CodeUri: src/" in text and "BuildMethod" not in text
        True
    """
    if flavor not in FLAVORS:
        raise ConfigurationError(f"unknown template flavor {flavor!r}; one of {FLAVORS}")
    if not NAME.fullmatch(name):
        raise ConfigurationError(
            f"cannot use {name!r} as a stack name",
            hint="start with a letter; then letters, digits, '-' or '_' (63 at most)",
        )
    if not APP.fullmatch(app):
        raise ConfigurationError(f"expected MODULE:ATTRIBUTE for the app, got {app!r}")
    values = {
        "name": name,
        "app": app,
        "state_key_statement": load("state-key-statement.yaml.tmpl"),
        "signing_key_statements": load("signing-key-statements.yaml.tmpl"),
    }
    return fill(keep_flavor(load("template.yaml.tmpl"), flavor), values)
