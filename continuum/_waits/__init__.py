"""Waits inside a turn, on its state (``wait_calls``: sleep, callbacks, signals), and the
answers written to a task's inbox from outside (``answers``).

May import: errors, _base, backends, _record, _define, _steps.
"""
