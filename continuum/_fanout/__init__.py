"""Fan-out inside a turn: what it needs of the runner of the context it starts from
(``parent_runner``); child contexts (``branches``); ``parallel`` and ``map`` on threads
(``batches``); child tasks (``invoke``: ``invoke`` and ``map_tasks``; ``child_tasks``: how
they start and report), and which of their reports a parent takes (``adoption``).

May import: errors, _base, backends, _record, _define, _steps, _waits.
"""
