"""The wheel of the running continuum, for ``continuum init`` to vendor into a new project.

``continuum-lambda`` is on no package index, so a project cannot name it and let pip find it,
and a path or URL to where it was installed from exists on that machine only. ``init`` writes
the wheel of the continuum that runs it into the project (``src/wheels/``), where
``src/requirements.txt`` finds it on any machine: for the project's venv and for ``sam build``.

The wheel holds the ``continuum`` package as it is installed (from a wheel, a directory or an
editable checkout: the files under the imported package, less bytecode) and the distribution's
own metadata (``METADATA``, ``entry_points.txt``), with a ``RECORD`` of their digests.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from importlib import metadata
from pathlib import Path

from continuum.errors import ConfigurationError

#: The distribution's name on an index; the import package and the command are ``continuum``.
DISTRIBUTION = "continuum-lambda"
#: The package the wheel holds.
PACKAGE = Path(__file__).resolve().parents[1]
#: Every file of a zip gets this time, so that the same continuum makes the same wheel.
_EPOCH = (1980, 1, 1, 0, 0, 0)
_WHEEL = "Wheel-Version: 1.0\nGenerator: continuum init\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _distribution() -> metadata.Distribution:
    """The installed ``continuum-lambda``: what pip recorded (a checkout's own egg-info, which
    may come first on ``sys.path``, only if there is nothing else).

    Raises:
        ConfigurationError: continuum runs without being installed (from a source tree on
            ``PYTHONPATH``), so there is no distribution to vendor.
    """
    found = list(metadata.distributions(name=DISTRIBUTION))
    if not found:
        raise ConfigurationError(
            f"continuum init vendors the installed {DISTRIBUTION} into the project, but "
            f"{DISTRIBUTION} is not installed (continuum runs from {PACKAGE.parent})",
            hint=f"install it first: pip install {PACKAGE.parent} (or its wheel)",
        )
    return next((d for d in found if d.read_text("METADATA") is not None), found[0])


def installed_version() -> str:
    """The version of the installed ``continuum-lambda`` (see :func:`_distribution`)."""
    return _distribution().version


def wheel_name() -> str:
    """The file name of the wheel :func:`build_wheel` makes."""
    return f"{DISTRIBUTION.replace('-', '_')}-{installed_version()}-py3-none-any.whl"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def build_wheel() -> bytes:
    """The bytes of a pure-Python wheel of the installed continuum (see the module's doc)."""
    dist = _distribution()
    version = dist.version
    info = f"{DISTRIBUTION.replace('-', '_')}-{version}.dist-info"
    files: dict[str, bytes] = {}
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[f"continuum/{path.relative_to(PACKAGE).as_posix()}"] = path.read_bytes()
    meta = dist.read_text("METADATA") or dist.read_text("PKG-INFO")  # PKG-INFO: an egg-info
    if meta is None:
        raise ConfigurationError(f"the installed {DISTRIBUTION} {version} has no METADATA")
    files[f"{info}/METADATA"] = meta.encode()
    files[f"{info}/WHEEL"] = _WHEEL.encode()
    files[f"{info}/top_level.txt"] = b"continuum\n"
    if (entry_points := dist.read_text("entry_points.txt")) is not None:
        files[f"{info}/entry_points.txt"] = entry_points.encode()
    record = "".join(_record_line(name, data) for name, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, date_time=_EPOCH)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            wheel.writestr(entry, data)
    return out.getvalue()
