"""From outside a task: the client and what it reads and steers.

``client`` (start, status, resume, result, answers, cancel), ``status`` (what ``Client.status``
reports), ``steering`` (the tasks list, retry and fork) with ``reopening`` (what a retry runs
again) and ``child_traces`` (where a retried child's trace hangs), ``inspection`` (``continuum
inspect``: what a task did, from its record's versions) with ``agent_view`` (an agent task's
model requests, tool calls and approvals), ``links`` (the callback link endpoint for what runs
outside a task), ``prices`` (cost in dollars) and ``schedule_sync`` (the stack's recurring
schedules made what the app declares, and what they do).

May import: errors, _base, backends, _record, _define, _waits, _fanout, _turn, _worker.
"""
