"""Waits inside a turn (sleep, callbacks, signals, conditions, the delivery of a cancel) and
the answers written to a task's inbox from outside.

May import: errors, _base, backends, _record, _define, _steps.
"""
