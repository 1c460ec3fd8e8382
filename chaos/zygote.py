"""A fork server for worker processes: imports once, forks a fresh worker in milliseconds.

A cold ``python -m chaos.worker`` spends most of a second importing boto3, pydantic and
continuum. A run that kills a worker every few invocations would spend its time starting
Python, so the fleet starts this process once: it imports the worker's modules and loads
botocore's service models (it makes no AWS call and starts no thread), then forks one child
per request. Each child is a new process with the app as freshly imported, unconfigured — what
a new Lambda execution environment has — and runs ``chaos.worker.main`` with its own command
line; it then keeps its app between invocations (a warm worker) until it dies or is stopped.

The protocol is one JSON line each way, on stdin and stdout:

- ``{"op": "spawn", "argv": [...], "log": PATH}`` -> ``{"pid": N}`` (the child's output goes
  to PATH);
- ``{"op": "reap"}`` -> ``{"exited": [[pid, code], ...]}``: children that ended since the last
  reap, with ``subprocess``'s return code convention (-9: killed by SIGKILL). A child is
  reaped only here, so its pid cannot be reused while the fleet may still signal it.

At the end of stdin it exits; its children notice that their parent is gone and stop.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

import boto3

from chaos import worker
from chaos.server import client_options


def warm() -> None:
    """Load the S3 and SQS service models into boto3's default session (no request is made)."""
    options = client_options("http://127.0.0.1:9")
    boto3.client("s3", **options)
    boto3.client("sqs", **options)


def child(argv: list[str], log: str) -> None:
    """Run in the forked child: point stdio at ``log``, run the worker, never return."""
    code = 0
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        worker.main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def reap() -> list[list[int]]:
    """Children that ended: [pid, return code] each."""
    exited = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        exited.append([pid, os.waitstatus_to_exitcode(status)])
    return exited


def answer(reply: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()


def main() -> None:
    warm()
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "spawn":
            pid = os.fork()
            if pid == 0:
                child(request["argv"], request["log"])
            answer({"pid": pid})
        elif request["op"] == "reap":
            answer({"exited": reap()})
        else:
            answer({"error": f"unknown op {request['op']!r}"})


if __name__ == "__main__":
    main()
