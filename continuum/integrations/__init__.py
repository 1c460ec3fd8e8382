"""Integrations with other libraries, each behind an optional extra (the core imports none).

May import: errors, _base, backends, _record, _define, _steps, _waits, _fanout, _turn, _worker,
_ops, _app, _local, continuum.
"""
