"""Running locally: the runtime that emulates Lambda over moto or the in-memory backend,
virtual time, what each run did, the dev stack and the standalone worker.

May import: errors, _base, backends, _record, _define, _steps, _waits, _fanout, _turn, _worker,
_ops, _app.
"""
