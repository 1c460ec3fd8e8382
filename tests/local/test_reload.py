"""continuum dev finds the app's files without importing it, and sees what changed."""

from __future__ import annotations

import os
import sys

from continuum._local.source_watch import SourceWatcher, source_roots


def test_a_module_is_watched_in_its_directory_and_a_package_in_its_own(tmp_path, monkeypatch):
    (tmp_path / "tides_app.py").write_text("raise SystemExit('never imported')\n")
    (tmp_path / "tides_pkg").mkdir()
    (tmp_path / "tides_pkg" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert source_roots("tides_app:app") == [tmp_path.resolve()]
    assert source_roots("tides_pkg.tasks:app") == [(tmp_path / "tides_pkg").resolve()]
    assert "tides_app" not in sys.modules
    assert source_roots("no_such_module:app") == []
    assert source_roots("json:app") == []  # the standard library
    assert source_roots("pydantic:app") == []  # site-packages


def test_the_watcher_reports_added_changed_and_removed_python_files_only(tmp_path):
    code = tmp_path / "tides.py"
    code.write_text("a = 1\n")
    (tmp_path / ".venv").mkdir()
    watcher = SourceWatcher([tmp_path])
    assert watcher.changed() == []

    code.write_text("a = 22\n")
    (tmp_path / "notes.txt").write_text("not code")
    (tmp_path / ".venv" / "lib.py").write_text("ignored")
    assert watcher.changed() == [code]
    assert watcher.changed() == []

    helper = tmp_path / "sub" / "helper.py"
    helper.parent.mkdir()
    helper.write_text("")
    assert watcher.changed() == [helper]
    os.remove(code)
    assert watcher.changed() == [code]
