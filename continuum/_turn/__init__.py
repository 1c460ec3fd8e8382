"""The turn loop (``loop``): it runs a task's function with its ``TaskContext`` (``context``)
until the task returns, suspends, waits or fails; the runner every ``ctx.*`` call goes through,
which makes a child context's own (``context_runner``); an async task's turns on the invocation's
event loop (``event_loop``, in the slot the worker opens: ``loop_slot``), with the order its
asyncio tasks ended in (``ending_order``); and the task definitions it runs (``tasks``).

May import: errors, _base, backends, _record, _define, _steps, _waits, _fanout.
"""
