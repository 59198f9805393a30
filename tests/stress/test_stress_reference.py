"""The reference stores under the stress harness: SQLite file and Postgres pass every
scenario; the JSON-file example is pinned as NOT cross-process safe (docs/backend-guide.md
§8); the in-memory store cannot be shared at all."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import pytest
from stress_helpers import until_caught

import reference_stores.jsonfile as jsonfile
import reference_stores.memory as memory
import reference_stores.postgres as postgres
import reference_stores.sqlite as sqlite
from chongming_conformance.seam.factory import StoreShapeError, enter_opener
from chongming_conformance.stress import (
    Opener,
    StressContract,
    sqlite_opener_integrity,
)


class TestSqliteFileStress(StressContract):
    """SqliteTaskStore on one file, opened by every worker: the default (ci) profile."""

    stress_profile = "ci"

    def make_shared_store(self) -> Any:
        return sqlite.make_shared_store()

    def check_integrity(self, opener: Opener) -> Sequence[str]:
        return sqlite_opener_integrity(opener)


@pytest.mark.postgres
class TestPostgresStress(StressContract):
    """PostgresTaskStore on a fresh schema per scenario (skips visibly without a server)."""

    stress_profile = "ci"

    @pytest.fixture(autouse=True)
    def _server(self, postgres_dsn: str) -> None:
        assert postgres_dsn

    def make_shared_store(self) -> Any:
        return postgres.make_shared_store()


@pytest.mark.parametrize(
    ("scenario", "kinds"),
    [("save_race", {"lost-update", "no-winner", "unexpected-error"}),
     ("claim_race", {"double-hold", "completed-twice", "unexpected-error"})],
)
def test_jsonfile_store_is_pinned_as_not_cross_process_safe(scenario: str,
                                                            kinds: set[str]) -> None:
    """The JSON-file template is correct in one process only (docs/backend-guide.md §8);
    the harness says so."""
    attempt, result = until_caught(jsonfile.make_shared_store, scenario, "quick", attempts=5)
    assert result.anomalies or result.errors, (
        f"the harness passed the lock-free JSON-file store on {scenario} {attempt} times in a "
        "row; it must be reported as not cross-process safe")
    assert result.kinds() & kinds or result.errors, result.report()


def test_memory_store_cannot_be_shared() -> None:
    """No make_shared_store, and handing its make_store to the harness is refused clearly."""
    assert not hasattr(memory, "make_shared_store")
    with contextlib.ExitStack() as stack, pytest.raises(StoreShapeError, match="not an opener"):
        enter_opener(memory.make_store, stack)
