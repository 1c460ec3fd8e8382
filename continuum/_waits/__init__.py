"""Waits inside a turn, on its state (``wait_calls``: the template each kind enters through;
``kinds``: one module per kind of wait, time, callbacks, signals and child tasks, and the
registry that lists them), the answers written to a task's inbox from outside
(``answers``), and the callback link a person opens to answer one: its endpoint
(``link_endpoint``) and its page (``link_page``).

May import: errors, _base, backends, _record, _define, _steps.
"""
