"""Where records and continuations live: the store and queue protocols, every type a backend
needs, S3 and SQS, and ``memory`` (the in-memory twins on an injectable clock).

This package is public: a third-party backend implements ``RecordStore`` and
``ContinuationQueue`` from here.

May import: errors, _base.
"""
