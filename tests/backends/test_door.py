"""``continuum.backends`` is a public door: what a third-party backend needs, sorted."""

from __future__ import annotations

import subprocess
import sys

import continuum
import continuum.backends
import continuum.testing


def test_all_is_sorted_and_every_name_resolves():
    assert continuum.backends.__all__ == sorted(continuum.backends.__all__)
    for name in continuum.backends.__all__:
        assert getattr(continuum.backends, name) is not None


def test_the_door_has_the_protocols_their_types_and_the_implementations():
    for name in (
        "RecordStore",
        "ContinuationQueue",
        "StoredObject",
        "ObjectVersion",
        "NoSuchKey",
        "PreconditionFailed",
        "StoreError",
        "TransientStoreError",
        "QueueMessage",
        "QueueError",
        "put_with_retries",
        "S3RecordStore",
        "SQSContinuationQueue",
        "InMemoryRecordStore",
        "InMemoryContinuationQueue",
    ):
        assert name in continuum.backends.__all__
    assert continuum.backends.RecordStore is continuum.RecordStore
    assert continuum.backends.ContinuationQueue is continuum.ContinuationQueue
    from continuum.backends import memory

    for name in memory.__all__:  # the twins continuum.testing exports are these
        assert getattr(continuum.testing, name) is getattr(continuum.backends, name)


def test_the_door_imports_s3_and_sqs_only_when_asked():
    code = (
        "import sys, continuum.backends as b;"
        "assert 'continuum.backends.s3' not in sys.modules;"
        "assert 'continuum.backends.sqs' not in sys.modules;"
        "b.S3RecordStore; assert 'continuum.backends.s3' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
