"""What continuum stores and sends: the task record (its model, counters, history and what
it waits for), the continuation message, the codec (inline values, segments, blobs), the
inbox beside the record, recovery markers and the sweep of a finished task.

May import: errors, _base, backends.
"""
