"""The ground every layer stands on: the wall clock continuum reads (``clock``), what a frozen
clock needs of continuum (``frozen_clocks``: freezegun's fake dates as pydantic types), the keys
that sign continuation messages (``signing_keys``) and callback links (``callback_links``),
the trace and span ids a task's invocations derive alike (``trace_ids``), calls side by side
on threads that carry
the caller's context (``threads``), values as JSON (``json_values``), the shape a callback's
request says a valid answer has (``json_shapes``) and a failure's traceback as a record keeps
it (``tracebacks``).

May import: errors.
"""
