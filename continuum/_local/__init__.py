"""Running locally: the runtime that emulates Lambda over moto or the in-memory backend, and
the pieces around it.

``runtime`` (``LocalRuntime``: emulated invocations over moto or the in-memory backend),
``lambda_emulation`` (the Lambda context and SQS event records), ``virtual_time`` (a clock
that jumps to the next due message), ``reports`` (what each invocation and run did),
``shutdown`` (a stop on SIGTERM that suspends running tasks), ``standalone`` (the worker that
polls queues outside Lambda, and its defaults: ``worker_defaults``), ``dev_stack`` and
``moto_guard`` (the moto server of ``continuum
dev``), and ``source_watch`` (which files changed, for a reload).

May import: errors, _base, backends, _record, _define, _waits, _worker, _ops, _app.
"""
