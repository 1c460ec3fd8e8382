"""Integrations with other libraries, each behind an optional extra (the core imports none).

``pydantic_ai``: pydantic-ai agents as durable tasks (``continuum-lambda[pydantic-ai]``): each of
pydantic-ai's durable operations (a model request, a tool call) is a step, and a tool that needs
a person's yes waits on a callback.

``opentelemetry``: OpenTelemetry traces of tasks (``continuum-lambda[otel]``): ``Tracing``, an
observer that makes one trace per task across its invocations and child tasks.

The tracing reads the wait kinds (``_waits``: what each is called in events and on AWS), so
that a kind added to their registry is traced without a table here.

May import: errors, _base, _define, _steps, _waits, _turn.
"""
