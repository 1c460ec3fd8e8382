"""``continuum run``'s summary counts what happened and names every figure it prints."""

from __future__ import annotations

import json
import re

from tests.outside.processes import base_env, cli


def test_the_summary_counts_every_turn_and_the_timer_hops_and_labels_each_figure():
    done = cli("run", "tests.local.summary_app:three_turns", "--json", env=base_env())
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["turns"] == 3  # turns 0, 1 and 2: the last returned the result
    assert summary["hops"] >= 1
    hops = re.search(r"\.\.\.\s+(\d+) timer hops", done.stdout)
    assert hops is not None
    assert summary["hops"] == int(hops[1])
    lines = done.stdout.strip().splitlines()
    figures, calls = lines[-3], lines[-2]
    assert "turns 3" in figures
    assert f"timer hops {summary['hops']}" in figures
    assert f"invocations {summary['invocations']}" in figures
    # Every number printed follows its label: none stands alone or after another number.
    number = re.compile(r"\d+(\.\d+)?")
    for line in (figures, calls):
        words = [word for word in re.split(r"[\s,()]+", line) if word]
        for index, word in enumerate(words):
            if number.fullmatch(word):
                assert index > 0, (line, word)
                assert not number.fullmatch(words[index - 1]), (line, word)
    assert "scheduler calls 1" in calls
    assert re.search(r"wall time \d+\.\d s", calls), calls


def test_a_schedules_runs_are_labelled_as_such_and_the_summary_counts_what_the_lines_show():
    done = cli("run", "tests.local.scheduled_app:long_nap", "--json", env=base_env())
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    lines = [line for line in done.stdout.splitlines() if line.startswith("invocation ")]
    fires = [line for line in lines if "a schedule's fire: started its run" in line]
    runs = [line for line in lines if "schedule nightly's run nightly-" in line]
    own = [line for line in lines if line not in fires and line not in runs]
    assert fires
    assert len(runs) == len(fires)
    assert not any("child" in line for line in lines)
    assert summary["invocations"] == len(own)
    numbers = [int(line.split()[1]) for line in lines]
    assert summary["all_invocations"] == max(numbers) == len(lines) + summary["hops"]
    figures = done.stdout.strip().splitlines()[-3]
    assert f"invocations {summary['invocations']}  " in figures
    assert f"other invocations {len(fires) + len(runs)} " in figures
