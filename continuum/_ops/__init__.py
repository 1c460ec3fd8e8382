"""From outside a task: the client (start, status, result, answers, cancel), inspect, retry,
fork and cost.

May import: errors, _base, backends, _record, _define, _steps, _waits, _fanout, _turn, _worker.
"""
