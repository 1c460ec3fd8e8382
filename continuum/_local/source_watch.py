"""Reloading for continuum dev: which files hold an app's code, and whether they changed.

The app is never imported here: its module is found on ``sys.path`` (the current directory
first, as ``continuum worker`` imports it), and the directory that holds it is watched for
Python files that are added, removed or changed. Polling needs no dependency and no OS
notification API, and a project's source tree is small.

Example:
    >>> watcher = SourceWatcher(source_roots("tides:app"))  # doctest: +SKIP
    >>> watcher.changed()  # doctest: +SKIP
    []
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from pathlib import Path

#: Directories never watched: environments, caches, build output, version control.
IGNORED_DIRS = frozenset(
    {".venv", "venv", ".git", "__pycache__", ".aws-sam", "node_modules", "site-packages"}
)

Snapshot = dict[Path, tuple[int, int]]


def source_roots(target: str) -> list[Path]:
    """The directories whose Python files make up the app ``MODULE:APP``'s code.

    For a module ``tides`` that is the directory holding ``tides.py``; for a package, the
    package's directory. An installed module (the standard library, ``site-packages``) or
    one that cannot be found gives no root.
    """
    top = target.partition(":")[0].partition(".")[0]
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    finally:
        if added:
            sys.path.remove(cwd)
    if spec is None:
        return []
    if spec.submodule_search_locations:
        roots = [Path(p) for p in spec.submodule_search_locations]
    elif spec.origin and spec.has_location:
        roots = [Path(spec.origin).parent]
    else:
        return []
    installed = [Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "purelib", "platlib")]
    return [
        root
        for root in (r.resolve() for r in roots)
        if not any(root.is_relative_to(place) for place in installed)
    ]


class SourceWatcher:
    """Reports the Python files under some roots that changed since it last looked."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = roots
        self._seen = self._snapshot()

    def changed(self) -> list[Path]:
        """The files added, removed or modified since the last call (or since creation)."""
        now = self._snapshot()
        changed = sorted(
            p for p in now.keys() | self._seen.keys() if now.get(p) != self._seen.get(p)
        )
        self._seen = now
        return changed

    def _snapshot(self) -> Snapshot:
        found: Snapshot = {}
        for root in self.roots:
            for folder, dirs, files in os.walk(root):
                dirs[:] = [d for d in dirs if d not in IGNORED_DIRS and not d.startswith(".")]
                for name in files:
                    if name.endswith(".py"):
                        path = Path(folder, name)
                        try:
                            stat = path.stat()
                        except OSError:  # removed while we looked
                            continue
                        found[path] = (stat.st_mtime_ns, stat.st_size)
        return found
