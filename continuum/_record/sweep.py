"""The sweep of a finished task: its objects tidied for the lifecycle rule, until it is done.

When a task finishes, its blobs that the final record uses and its inbox objects are tagged
``continuum-finished=true`` (the bucket's lifecycle rule expires tagged objects only), the
blobs it no longer uses are deleted (a mid-run removal that failed, or a worker that died
between a write and its removal, leaves them for this sweep), and the record is tagged
**last**: a finished record tagged finished is a complete sweep.

A sweep can be cut short: the worker is killed right after the finish write, a call fails
(after botocore's own retries), or the write's reply is lost and the read that would confirm
it fails too. Then the record stays untagged and the message comes back: a sweep that fails
raises :class:`SweepIncompleteError` out of the handler, so SQS delivers the message again,
up to the queue's ``maxReceiveCount``, then to the dead-letter handler, which sweeps too. A
message of a finished task reads the record's tags (one GetObjectTagging) and sweeps again
unless they say it is done. Every step is idempotent: tagging twice, deleting a deleted blob.

What it costs: the finish sweep makes the calls the finish always made (two LISTs, a tag or
a delete a blob, a tag an inbox object, the record's tag). A message of a finished task adds
one GetObjectTagging, and the sweep only if the last one was cut short. A continuation of a
running task adds nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from continuum._base.threads import in_parallel
from continuum._record.blobs import FINISHED_TAGS, BlobKeys, Blobs
from continuum._record.model import TaskRecord
from continuum.backends.store import NoSuchKey, RecordStore, StoreError
from continuum.errors import RecordError

logger = logging.getLogger("continuum._record.sweep")

#: Tags and deletes of one sweep in flight at once (S3 takes thousands a second a prefix).
SWEEP_THREADS = 16


class SweepIncompleteError(RecordError):
    """A finished task's objects are not all tidied: a call of its sweep failed.

    The record is left untagged, so the sweep runs again at the task's next message: raised
    out of the handler, this error makes SQS deliver that message again. ``failed`` names
    the calls that failed; ``revision`` is the record's when a finish write landed just before.
    """

    def __init__(self, task_id: str, failed: list[str], *, revision: str | None = None) -> None:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        super().__init__(
            f"the finished task's objects are not all tidied: {failed[0]}{more}; its record "
            "is left untagged so that the message is retried and the sweep finishes",
            task_id=task_id,
            hint="nothing to do if a retry succeeds; if it keeps failing, check S3 and the "
            "function's permissions on the task's objects (s3:ListBucket, s3:DeleteObject, "
            "s3:PutObjectTagging, s3:GetObjectTagging): untagged objects never expire",
        )
        self.failed = failed
        self.revision = revision


class Sweeper:
    """Sweeps finished tasks' objects (the blob store's side of ``persistence.Records``).

    Args:
        store: the bytes (S3, or the in-memory fake).
        blobs: the tasks' blobs (where they are; which ones a record uses).
        inbox_key: a task id's inbox object key, by name (``""``: the inbox's prefix).
        record_key: a task id's record key.
    """

    def __init__(
        self,
        store: RecordStore,
        blobs: Blobs,
        inbox_key: Callable[[str, str], str],
        record_key: Callable[[str], str],
    ) -> None:
        self.store = store
        self.blobs = blobs
        self.inbox_key = inbox_key
        self.record_key = record_key

    def sweep(self, task_id: str, used: BlobKeys) -> None:
        """Tag the blobs the final record uses (``used``) and the inbox objects, delete the
        other blobs, then tag the record. Idempotent.

        Raises:
            SweepIncompleteError: a call failed; the record is left untagged.
        """
        failed = self._tidy(self.blobs.folder(task_id), lambda key: key in used)
        failed += self._tidy(self.inbox_key(task_id, ""), lambda key: True)
        if not failed:
            failed = self._tidy_keys([self.record_key(task_id)], lambda key: True)
        if failed:
            raise SweepIncompleteError(task_id, failed)

    def swept(self, task_id: str) -> bool:
        """Whether a finished task's sweep completed: its record is tagged finished (one
        GetObjectTagging). Unknown (the read failed) counts as not: sweeping is idempotent."""
        try:
            tags = self.store.tags(self.record_key(task_id))
        except NoSuchKey:
            return True  # no record (any more): nothing of it to tidy
        except StoreError as exc:
            logger.warning("could not read the tags of finished task %s: %s", task_id, exc)
            return False
        return all(tags.get(name) == value for name, value in FINISHED_TAGS.items())

    def ensure_swept(self, record: TaskRecord) -> bool:
        """For a message of a finished task: sweep it unless its sweep completed. Return
        whether it swept now.

        Raises:
            SweepIncompleteError: the sweep ran and did not complete (retry the message).
        """
        if self.swept(record.task_id):
            return False
        self.sweep(record.task_id, self.blobs.keys_of(record))
        logger.info("finished the sweep of task %s, which had been cut short", record.task_id)
        return True

    def _tidy(self, prefix: str, keep: Callable[[str], bool]) -> list[str]:
        """Tag the keys under ``prefix`` to ``keep``, delete the others; return what failed."""
        try:
            keys = self.store.list_keys(prefix)
        except StoreError as exc:
            return [f"list {prefix}: {exc}"]
        return self._tidy_keys(keys, keep)

    def _tidy_keys(self, keys: list[str], keep: Callable[[str], bool]) -> list[str]:
        """Tag or delete each key, side by side (a parent of 1,000 children has 1,000
        reports); return what failed."""

        def tidy(key: str) -> str | None:
            kept = keep(key)
            try:
                if kept:
                    self.store.tag(key, FINISHED_TAGS)
                else:
                    self.store.delete(key)
            except NoSuchKey:  # gone since the listing: nothing left to tidy
                return None
            except StoreError as exc:
                return f"{'tag' if kept else 'delete'} {key}: {exc}"
            return None

        return [f for f in in_parallel(tidy, keys, threads=SWEEP_THREADS) if f is not None]
