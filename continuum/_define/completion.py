"""What a batch of branches, items or child tasks gives back: its policy and its result.

``Completion`` says when a batch stops starting work: after ``min_successful`` successes, or
once failures pass ``tolerated_failure_count`` or ``tolerated_failure_percentage`` (0 failures
tolerated is fail-fast). As in AWS's durable-execution semantics, the batch's ``status`` is
``failed`` whenever any item failed: the policy decides only when to stop starting items,
and ``completion_reason``. With no completion every item runs. A :class:`BatchResult` lists
the items that started, in index order.

Example:
    >>> result = ctx.map(urls, fetch_one, max_concurrency=10)  # doctest: +SKIP
    >>> pages = result.values()  # raises BatchError if any item failed  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from continuum._record.model import ErrorInfo
from continuum.errors import BatchError, ConfigurationError

ItemStatus = Literal["succeeded", "failed"]
CompletionReason = Literal["all_completed", "min_successful_reached", "failure_tolerance_exceeded"]


class Completion(BaseModel):
    """When a batch stops starting items (see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    min_successful: int | None = None
    tolerated_failure_count: int | None = None
    tolerated_failure_percentage: float | None = None

    @model_validator(mode="after")
    def _check(self) -> Completion:
        if self.min_successful is not None and self.min_successful < 1:
            raise ValueError("min_successful must be at least 1")
        if self.tolerated_failure_count is not None and self.tolerated_failure_count < 0:
            raise ValueError("tolerated_failure_count must not be negative")
        pct = self.tolerated_failure_percentage
        if pct is not None and not 0 <= pct <= 100:
            raise ValueError("tolerated_failure_percentage must be between 0 and 100")
        return self

    def verdict(self, *, succeeded: int, failed: int, total: int) -> CompletionReason | None:
        """Why the batch stops starting items now, or None while it goes on."""
        if self.tolerated_failure_count is not None and failed > self.tolerated_failure_count:
            return "failure_tolerance_exceeded"
        pct = self.tolerated_failure_percentage
        if pct is not None and total and failed * 100 > pct * total:
            return "failure_tolerance_exceeded"
        if self.min_successful is not None and succeeded >= self.min_successful:
            return "min_successful_reached"
        return None


def check_concurrency(max_concurrency: object, *, task_id: str | None = None) -> int | None:
    """``max_concurrency`` if it is None or a positive integer, else a ConfigurationError."""
    if max_concurrency is None:
        return None
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):
        raise ConfigurationError(
            f"max_concurrency must be a positive integer or None, got {max_concurrency!r}",
            task_id=task_id,
        )
    if max_concurrency < 1:
        raise ConfigurationError(
            f"max_concurrency must be a positive integer or None, got {max_concurrency}",
            task_id=task_id,
        )
    return max_concurrency


class Item(BaseModel):
    """One started item of a batch: its index, how it ended, its result or error."""

    index: int
    status: ItemStatus
    result: Any = None
    error: ErrorInfo | None = None
    #: a branch's name (``ctx.parallel`` with a dict), or a child task's id.
    name: str | None = None


class BatchResult(BaseModel):
    """The items of a batch that started, in index order, and why it stopped starting more."""

    items: list[Item]
    completion_reason: CompletionReason
    #: how many items the batch was given (``total_count`` counts those that started).
    given: int

    @property
    def total_count(self) -> int:
        return len(self.items)

    @property
    def success_count(self) -> int:
        return sum(item.status == "succeeded" for item in self.items)

    @property
    def failure_count(self) -> int:
        return sum(item.status == "failed" for item in self.items)

    @property
    def has_failure(self) -> bool:
        return self.failure_count > 0

    @property
    def status(self) -> ItemStatus:
        """``failed`` whenever any item failed, whatever the policy tolerated."""
        return "failed" if self.has_failure else "succeeded"

    def succeeded(self) -> list[Item]:
        return [item for item in self.items if item.status == "succeeded"]

    def failed(self) -> list[Item]:
        return [item for item in self.items if item.status == "failed"]

    def errors(self) -> list[ErrorInfo]:
        return [item.error for item in self.items if item.error is not None]

    def values(self) -> list[Any]:
        """The results in index order; raises BatchError if any item failed."""
        self.throw_if_error()
        return [item.result for item in self.items]

    def throw_if_error(self) -> None:
        """Raise BatchError naming the failed items, if any failed."""
        failed = self.failed()
        if failed:
            first = failed[0].error
            what = f"{first.type}: {first.message}" if first is not None else "failed"
            raise BatchError(
                f"{len(failed)} of {self.total_count} items failed; item {failed[0].index}: {what}",
                failures=[(item.index, item.error) for item in failed],
                step=first.step if first is not None else None,
            )
