"""Work handed to pool threads is counted where it belongs, and fails as a loop would."""

from __future__ import annotations

import threading

import pytest

from tests.support import Meter, in_parallel


def test_calls_on_pool_threads_count_in_the_callers_usage():
    meter = Meter()
    usage = meter.start()
    threads: set[int] = set()

    def get(_: int) -> None:
        threads.add(threading.get_ident())
        meter.count("s3_get")

    in_parallel(get, range(200), threads=8)
    assert usage.s3_get == 200
    assert len(threads) > 1  # it did run on pool threads


def test_two_messages_in_two_threads_count_apart():
    meter = Meter()
    counted: dict[str, int] = {}

    def handle(name: str, calls: int) -> None:
        usage = meter.start()
        in_parallel(lambda _: meter.count("s3_put"), range(calls), threads=4)
        counted[name] = usage.s3_put

    workers = [threading.Thread(target=handle, args=(n, c)) for n, c in (("a", 30), ("b", 7))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert counted == {"a": 30, "b": 7}


def test_results_come_in_order_and_the_first_error_is_raised_after_all_ran():
    ran: list[int] = []
    lock = threading.Lock()

    def fn(i: int) -> int:
        with lock:
            ran.append(i)
        if i in (3, 5):
            raise ValueError(f"item {i}")
        return i * i

    assert in_parallel(lambda i: i * i, list(range(10)), threads=4) == [i * i for i in range(10)]
    with pytest.raises(ValueError, match="item 3"):
        in_parallel(fn, list(range(10)), threads=4)
    assert sorted(ran) == list(range(10))
