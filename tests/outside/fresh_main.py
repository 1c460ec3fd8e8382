"""``continuum``'s main run in a fresh interpreter, and what it left there: its exit code, the
modules loaded, the AWS clients made (by service) and its output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.outside.processes import ROOT

#: The program: counts each client botocore makes, runs main, prints what it saw to stderr.
RUN_MAIN = """
import json, sys
import botocore.session

made = []
create_client = botocore.session.Session.create_client

def counted(self, service_name, *args, **kwargs):
    made.append(service_name)
    return create_client(self, service_name, *args, **kwargs)

botocore.session.Session.create_client = counted
from continuum.cli import main

code = main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps({"code": code, "modules": sorted(sys.modules), "clients": made}), file=sys.stderr)
"""


def run_main(*argv: str, env: dict[str, str], cwd: Path = ROOT) -> dict[str, Any]:
    """``continuum ARGV`` in a fresh interpreter: ``code``, ``modules``, ``clients``,
    ``stdout`` and ``stderr`` (its own lines, without the report)."""
    done = subprocess.run(
        [sys.executable, "-c", RUN_MAIN, *argv], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    *lines, report = done.stderr.strip().splitlines()
    return {**json.loads(report), "stdout": done.stdout, "stderr": "\n".join(lines)}
