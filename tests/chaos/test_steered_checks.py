"""The chaos checker on a retried task: what the retry kept must not run again, the rest may."""

from __future__ import annotations

from typing import Any

from chaos.checks import Report, check_history, check_steps

TASK = "mapmend-1-0008"


def version(status: str, journal: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    lease = {"owner": extra.pop("owner")} if "owner" in extra else None
    return {"status": status, "turn": 0, "generation": 0, "journal": journal, "lease": lease,
            **extra}  # fmt: skip


def run(key: str, inv: str) -> dict[str, Any]:
    return {"task_id": TASK, "turn": 0, "key": f"{TASK}/0/{key}", "step": "s", "inv": inv, "t": 1}


PIECE = {"key": "piece#0", "name": "piece", "kind": "step", "result": 1}
MEND = {"key": "mend#1", "name": "mend", "kind": "step", "ok": False}
HISTORY = [
    version("running", [], owner="a"),
    version("running", [PIECE, MEND], owner="a"),
    version("failed", [PIECE, MEND]),
    version("suspended", [PIECE], suspend_reason="retry"),
    version("running", [PIECE], owner="b"),
    version("succeeded", [PIECE, {**MEND, "ok": True}]),
]


def test_a_step_the_retry_reopened_may_run_again_after_it():
    report = Report()
    check_history(report, TASK, HISTORY)
    check_steps(report, {TASK: HISTORY}, [run("piece#0", "a"), run("mend#1", "a"),
                                          run("mend#1", "b")])  # fmt: skip
    assert report.violations["generation regressions"] == 0
    assert report.violations["re-executions of recorded steps"] == 0


def test_a_step_the_retry_kept_must_not_run_again_after_it():
    report = Report()
    check_steps(report, {TASK: HISTORY}, [run("piece#0", "a"), run("mend#1", "a"),
                                          run("piece#0", "b"), run("mend#1", "b")])  # fmt: skip
    assert report.violations["re-executions of recorded steps"] == 1
