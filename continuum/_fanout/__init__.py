"""Fan-out inside a turn: the runner a task's context talks to, which makes a child context's
own (``context_runner``); child contexts (``branches``); ``parallel`` and ``map`` on threads
(``batches``); child tasks (``invoke``: ``invoke`` and ``map_tasks``; ``child_tasks``: how
they start and report), and which of their reports a parent takes (``adoption``).

May import: errors, _base, backends, _record, _define, _steps, _waits.
"""
