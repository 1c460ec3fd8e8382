"""A step call inside a turn: the turn's scope, its state and its cancel boundaries
(``turn_state``), replay from the journal or a live run (``step_calls``; awaited in an async
task: ``async_step_calls``), a live call's attempts, decided once for both (``attempts``), what
becomes of an attempt that does not return (``attempt_endings``) and of an error that leaves a
turn's code (``failures``), the journal, the budget that says "not now", the inbox as a running
turn reads it (``task_inbox``) and the framework's control-flow exceptions (``control_flow``).

May import: errors, _base, backends, _record, _define.
"""
