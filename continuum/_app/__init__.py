"""The app: ``Continuum`` (``app``), which assembles the rest and hands SQS events to the
worker; the ``@app.task`` and ``@app.step`` decorators (``decorators``); what its constructor
takes (``options``); where its records and continuations live (``backend_config``); the
loading of an app named ``module:attribute`` (``loading``); and what a Lambda SnapStart
snapshot holds and a restored environment remakes (``snapstart``).

May import: errors, _base, backends, _record, _define, _steps, _waits, _fanout, _turn, _worker,
_ops.
"""
