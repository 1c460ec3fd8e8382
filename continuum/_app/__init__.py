"""The app: ``Continuum``, its registry of tasks and steps, its settings and backends, and
the handler that hands SQS events to the worker.

May import: errors, _base, backends, _record, _define, _steps, _waits, _fanout, _turn, _worker,
_ops.
"""
