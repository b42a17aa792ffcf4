"""Fixtures of the report selftests."""

from __future__ import annotations

import pytest
from report_samples import make_records

from harness.report.records import TestRecord


@pytest.fixture
def records() -> list[TestRecord]:
    return make_records()
