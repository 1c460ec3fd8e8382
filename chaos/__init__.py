"""Fault injection for continuum: real worker deaths, AWS faults and hostile deliveries.

Not part of the shipped package; run from the repository root::

    python -m chaos.harness --seed 7 --tasks 200

Modules, in the order a run uses them:

- ``server``: the moto server on loopback, the bucket and the queues.
- ``base``, ``tasks``, ``flows``: the chaos app; its steps record every real execution in a
  ledger (``flows``: the tasks that sleep, wait for callbacks and signals, are cancelled, map
  on threads and start child tasks).
- ``fleet``: the worker processes, each with a kill point drawn from the seed (or warm).
- ``zygote``: the fork server that starts each worker process in milliseconds.
- ``worker``: one worker process, an emulated Lambda execution environment.
- ``faults``: the botocore hooks and step wrappers that kill the worker or fail AWS calls.
- ``deliveries``: duplicate, late, stale and forged continuations; the dead-letter pump.
- ``outside``: the outside world: signals, callback answers and cancels, through a client
  whose calls fail and whose sender dies mid-call (and retries, as an at-least-once one does).
- ``checks``: the invariants, checked against every record version, every blob and the ledger.
- ``flowchecks``: what the waiting and fanning-out tasks and their children must end as, from
  their input and the outside world's log.
- ``harness``: the command line that runs it all and prints the figures.
"""
