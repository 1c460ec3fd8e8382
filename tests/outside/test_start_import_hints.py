"""``continuum start`` (and every command taking MODULE:NAME) run from the wrong directory
says where to run it from: a ``continuum init`` project's module lives in its src/."""

from __future__ import annotations

import sys

import pytest

from continuum import Continuum
from continuum._app.loading import load_target
from continuum.errors import ConfigurationError


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project laid out as ``continuum init proj`` lays it out: proj/src/proj.py."""
    src = tmp_path / "nuproj" / "src"
    src.mkdir(parents=True)
    (src / "nuproj.py").write_text("from continuum import Continuum\napp = Continuum()\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path / "nuproj"
    sys.modules.pop("nuproj", None)


def test_start_from_the_project_root_hints_at_its_src_directory(project, monkeypatch):
    monkeypatch.chdir(project)
    with pytest.raises(ConfigurationError) as caught:
        load_target("nuproj:app", Continuum, what="the app")
    assert "No module named 'nuproj'" in str(caught.value)
    assert "src/" in str(caught.value.hint)
    assert "PYTHONPATH=src" in str(caught.value.hint)


def test_start_from_above_the_project_says_the_directory_was_imported_not_the_module(
    project, monkeypatch
):
    monkeypatch.chdir(project.parent)
    with pytest.raises(ConfigurationError) as caught:
        load_target("nuproj:app", Continuum, what="the app")
    assert "a directory" in str(caught.value)
    assert "src/" in str(caught.value.hint)


def test_a_missing_dependency_of_the_app_is_not_blamed_on_the_directory(tmp_path, monkeypatch):
    (tmp_path / "needs_more.py").write_text("import no_such_dependency_here\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(ConfigurationError) as caught:
        load_target("needs_more:app", Continuum, what="the app")
    assert "no_such_dependency_here" in str(caught.value)
    assert caught.value.hint is None
