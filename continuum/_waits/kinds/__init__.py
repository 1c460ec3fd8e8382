"""Wait kinds: one module per kind of wait on one template (``template``), listed in one
place (``registry``): time (``time_wait``), callbacks (``callback_wait``), signals
(``signal_wait``) and child tasks (``child_wait``).

Each kind says, in its own module, how a turn enters and replays it (on ``WaitCaller``, the
template of ``wait_calls``: find the journal entry, answer it now or leave it partial and
unwind), what answers it in the task's inbox, its deadline and heartbeats, how it is shown
(status, report, page, command line) and how the outside world sends to it. The worker, the
client, the command line, the testing kit and the pages look a kind up in the registry
instead of switching on it.
"""
