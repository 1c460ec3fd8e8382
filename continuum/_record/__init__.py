"""What continuum stores and sends: the task record (``model``; its ``counters``, its
``history``, what it waits for: ``waiting_for``), what its models do with a field a newer release
wrote (``unknown_fields``), the codec (``codec``: inline values, ``segments``, ``blobs``), the
record-level seam that loads, creates and swaps records and keeps their inboxes, history and
sweep (``persistence``) and its implementation on the blob store (``blob_records``), the inbox
beside the record (``inbox``, ``inbox_items``), recovery markers (``recovery``), the sweep of a
finished task (``sweep``), the continuation message (``continuation``) and what a recurring
schedule's fires did (``schedule_runs``).

May import: errors, _base, backends.
"""
