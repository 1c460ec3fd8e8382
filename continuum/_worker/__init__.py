"""The Lambda edge: one SQS message through the protocol's steps, a module for each.

``worker`` runs the steps in order; ``admission`` is the ordered rules a message passes
before its task's turns run (the fence, the wake, the claim); ``sqs_batch`` is Powertools'
batch processor, the Lambda context, the logs and the outcome metrics; ``fence`` judges a
message against its record; ``wake`` decides what a message does to a waiting task;
``claim`` holds the record with a lease; ``invocation`` runs a claimed task's turns;
``endings`` suspends, parks or finishes it; ``long_waits`` hands a wait longer than one
delayed message to a one-time schedule; ``schedule_fires`` starts a recurring schedule's run;
``saved_operations`` tells the observers what each write of the record changed;
``warm_cache`` keeps the records a warm worker just wrote; ``metering`` counts the store and
queue calls of each message; ``dead_letter`` decides what the dead-letter queue holds.

May import: errors, _base, backends, _record, _define, _steps, _waits, _fanout, _turn.
"""
