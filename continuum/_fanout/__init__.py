"""Fan-out inside a turn: child contexts, ``parallel`` and ``map`` on threads, child tasks
(``invoke``, ``map_tasks``), which of their reports a parent takes, and their links.

May import: errors, _base, backends, _record, _define, _steps, _waits.
"""
