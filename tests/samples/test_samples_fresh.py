"""Each sample runs in a fresh process on the installed wheel, in virtual and in real time.

``continuum run ... --json`` in the venv the README's install block made (tests/fresh.py), from
a copy of the checkout; its JSON line must say ``succeeded`` with the result that the same
command gives on this checkout's own install, and real time must end as virtual time does.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fresh import ROOT, Installed, activated

pytestmark = pytest.mark.slow

SUPPORT_QUESTION = "Order A-1001 arrived broken. Can I get my money back?"
#: Each sample's task and the arguments of its run, as its docstring shows them.
SAMPLES = {
    "research_agent": ["samples.research_agent:research", "--input", '{"topic": "tides"}',
                       "--budget", "3"],
    "approval_agent": ["samples.approval_agent:publish", "--input", '{"topic": "tides"}',
                       "--answer", 'approval={"approved": true}'],
    "research_team": ["samples.research_team:lead", "--input", '{"topic": "tides"}',
                      "--budget", "2"],
    "support_agent": ["samples.support_agent:support", "--budget", "2", "--input",
                      json.dumps({"question": SUPPORT_QUESTION}), "--answer",
                      "approve.issue_refund=@approve"],
    "support_agent_async": ["samples.support_agent_async:support", "--budget", "2", "--input",
                            json.dumps({"question": SUPPORT_QUESTION}), "--answer",
                            "approve.issue_refund=@approve"],
}  # fmt: skip


def test_every_sample_is_run_here() -> None:
    found = {p.stem for p in (ROOT / "samples").glob("*.py") if p.stem != "__init__"}
    assert found == set(SAMPLES)


def summary(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert result.returncode == 0, result.stdout + result.stderr
    loaded: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return loaded


_reference: dict[str, dict[str, object]] = {}


def reference(sample: str) -> dict[str, object]:
    """The sample's JSON line from this checkout's own install (virtual time), once."""
    if sample not in _reference:
        env = activated(Path(sys.prefix), PYTHONPATH=str(ROOT))
        _reference[sample] = summary(subprocess.run(
            [sys.executable, "-m", "continuum.cli", "run", *SAMPLES[sample], "--json"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
        ))  # fmt: skip
    return _reference[sample]


def params() -> list[object]:
    cases: list[object] = []
    for sample in SAMPLES:
        for clock in ("virtual", "real"):
            cases.append(pytest.param(sample, clock, id=f"{sample}-{clock}"))
    return cases


@pytest.mark.parametrize(("sample", "clock"), params())
def test_the_sample_succeeds_in_a_fresh_process_on_the_wheel(
    installed: Installed, sample: str, clock: str
) -> None:
    args = [*SAMPLES[sample], "--json", *(["--real-time"] if clock == "real" else [])]
    command = shlex.join([str(installed.bin / "continuum"), "run", *args])
    ran = installed.sh(command, timeout=600)
    got = summary(ran)
    expected = reference(sample)
    assert got["status"] == "succeeded", got
    assert got["result"] == expected["result"]
    assert got["result"]
