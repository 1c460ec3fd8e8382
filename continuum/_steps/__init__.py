"""A step call inside a turn: replay from the journal or run live, its attempts, the budget
that says "not now", the turn's shared state and the framework's control-flow signals.

May import: errors, _base, backends, _record, _define.
"""
