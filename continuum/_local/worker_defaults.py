"""The standalone worker's defaults, apart from the worker: ``continuum worker --help`` shows
them without loading the runtime."""

from __future__ import annotations

#: SQS long-polls up to 20 s. An idle slot finishes its poll before the worker can exit (and
#: makes what the poll brought visible again), so a shorter poll makes a stop quicker; 5 s
#: costs about half a million empty receives per slot a month (about $0.20).
POLL_WAIT_S = 5
#: Default budget of one emulated invocation: the longest a Lambda function may run.
DEFAULT_BUDGET_S = 900.0
#: Default grace period after SIGTERM: ECS stops a container 30 s after it (its default
#: stopTimeout), so 25 s leaves the process time to exit. Spot gives 120 s of notice.
DEFAULT_GRACE_S = 25.0
