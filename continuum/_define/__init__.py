"""What a user declares: steps and their options, settings, observers, callbacks and the
completion policies of a batch.

May import: errors, _base, backends, _record.
"""
