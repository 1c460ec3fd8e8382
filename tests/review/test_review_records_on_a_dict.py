"""Review (issue 35): a ``Records`` written from ``persistence.Records``' docstring alone, on
dicts (tests/review/dict_records.py), passes the record-level contract suite: the seam holds
for the contract it states. Its run markers, written from ``RunMarkers``' docstring, pass the
suite's run-marker tests.

It runs the suite the way the suite's docstring says: a subclass giving ``records``.
"""

from __future__ import annotations

import pytest

from continuum._record.persistence import Records
from tests.backends.test_records_contract import RecordsContract
from tests.review.dict_records import DictRecords


class TestDictRecords(RecordsContract):
    @pytest.fixture
    def records(self, request: pytest.FixtureRequest) -> Records:
        return DictRecords()
