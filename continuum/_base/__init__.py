"""The ground every layer stands on: the clock continuum reads, signing keys, threads that
carry the caller's context, JSON values and the JSON shapes a callback declares.

May import: errors.
"""
