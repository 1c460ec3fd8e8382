"""The turn loop (``loop``): it runs a task's function with its ``TaskContext`` (``context``)
until the task returns, suspends, waits or fails; and the task definitions it runs
(``tasks``).

May import: errors, _base, backends, _record, _define, _steps, _waits, _fanout.
"""
