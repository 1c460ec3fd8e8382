"""The Lambda edge: one SQS message through the batch processor, the fence, the wake of a
waiting task, the claim, the invocation and its ending; dead letters.

May import: errors, _base, backends, _record, _define, _steps, _waits, _fanout, _turn.
"""
