"""Public prices, in one place, to turn what a task used into dollars.

US East (N. Virginia), on-demand, as published on the AWS pricing pages (Lambda, S3 Standard,
SQS standard); edit them here for another region or a newer price list. The same figures
price the benchmarks' comparisons (README, "The cost of a task").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from continuum._record.history import Usage


@dataclass(frozen=True)
class Prices:
    """Dollars per unit."""

    #: Lambda: per request, and per GB-second on arm64 (Graviton).
    lambda_request: float = 0.20 / 1_000_000
    lambda_gb_s: float = 0.0000133334
    #: S3 Standard: PUT, COPY, POST, LIST (and tagging) per request; GET per request.
    s3_put: float = 0.005 / 1000
    s3_get: float = 0.0004 / 1000
    #: S3 Standard storage, per GB-month.
    s3_gb_month: float = 0.023
    #: SQS standard queue: per request (64 KB chunk).
    sqs_request: float = 0.40 / 1_000_000
    #: Step Functions standard: per state transition; a Wait state is entered and left.
    sfn_transition: float = 25.0 / 1_000_000
    sfn_transitions_per_wait: int = 2
    #: Lambda durable functions, per durable operation (a step, a wait, a callback...); its
    #: data written and retained are priced too, and not counted here.
    durable_operation: float = 8.00 / 1_000_000


PRICES = Prices()


def dollars(usage: Usage, prices: Prices = PRICES) -> dict[str, float]:
    """What ``usage`` cost, by service, and in all (DELETE requests are free)."""
    lam = usage.invocations * prices.lambda_request + usage.gb_ms / 1000 * prices.lambda_gb_s
    s3 = (usage.s3_put + usage.s3_list + usage.s3_tag) * prices.s3_put
    s3 += usage.s3_get * prices.s3_get
    # The event source's receive and delete of each message are requests too.
    sqs = (usage.sqs_send + usage.sqs_visibility + 2 * usage.sqs_receives) * prices.sqs_request
    return {"lambda": lam, "s3": s3, "sqs": sqs, "total": lam + s3 + sqs}


def money(amount: float) -> str:
    """``amount`` dollars to three significant digits, cents at least, never in exponent form:
    a task's cost is often a few millionths of a dollar."""
    if amount == 0:
        return "$0"
    if abs(amount) >= 1:
        return f"${amount:.2f}"
    digits = max(2, 2 - math.floor(math.log10(abs(amount))))
    return f"${amount:.{digits}f}"
