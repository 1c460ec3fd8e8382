"""Waits inside a turn, on its state (``wait_calls``: sleep, callbacks, signals), and the
answers written to a task's inbox from outside (``answers``), and the callback link a person
opens to answer one: its endpoint (``link_endpoint``) and its page (``link_page``).

May import: errors, _base, backends, _record, _define, _steps.
"""
