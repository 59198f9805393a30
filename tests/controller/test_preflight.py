"""checks.controller.preflight: a controller check's failure is a knock-on only when a
foundation call is broken on a fresh store; the traps stay the controller clause's own."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest
from broken_stores import (
    CountsCachedAtCreate,
    CreateResetsVersion,
    DropsProgressTotal,
    ReleaseCompletes,
    TruncatesMicroseconds,
)

from chongming_conformance.checking.controller.preflight import FOUNDATION, explain, preflight
from chongming_conformance.oracle.blame import BLAME_NOTE, blame, notes_blame
from chongming_conformance.protocol import TaskStore
from chongming_conformance.protocol.model import TaskQuery, TaskSnapshot
from chongming_conformance.seam.factory import enter_store
from reference_stores import memory, sqlite


@pytest.mark.parametrize("make", [memory.make_store, sqlite.make_store], ids=["memory", "sqlite"])
def test_the_preflight_passes_on_a_correct_store(make: Callable[[], Any]) -> None:
    with contextlib.ExitStack() as stack:
        preflight(enter_store(make, stack, origin="reference store"))


class _DropsFilter(memory.InMemoryTaskStore):
    """A query that ignores one filter (``FIELD``) altogether."""

    FIELD = ""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        return super().query(replace(query or TaskQuery(), **{self.FIELD: None}))


class DropsTag(_DropsFilter):
    FIELD = "tag"


class DropsPipeline(_DropsFilter):
    FIELD = "pipeline_run_id"


class DropsBuckets(_DropsFilter):
    FIELD = "buckets"


@pytest.mark.parametrize(
    ("store_type", "clause"),
    [
        (CreateResetsVersion, "CREATE-THEN-GET"),
        (DropsProgressTotal, "SNAPSHOT-FULL-ROUNDTRIP"),
        (TruncatesMicroseconds, "TIME-UTC-ROUNDTRIP"),
        # the reads behind a controller's list_tasks, tasks_in_buckets and stats
        (DropsTag, "QUERY-TAG-EXACT"),
        (DropsPipeline, "QUERY-PIPELINE"),
        (DropsBuckets, "QUERY-BUCKETS"),
        (CountsCachedAtCreate, "COUNTS-PER-STATUS"),
    ],
)
def test_a_broken_foundation_turns_the_failure_into_its_knock_on(
    store_type: type[TaskStore], clause: str
) -> None:
    failure = AssertionError("the controller check's own assertion")
    explain(failure, store_type)
    assert notes_blame(failure) == (clause,)
    assert any(n.startswith("knock-on:") and clause in n for n in failure.__notes__)


def test_a_trap_the_controller_clause_exists_for_is_not_explained_away() -> None:
    # release() that completes is RELEASE-NOT-COMPLETE, and what it does to a controller
    # (the stop never reaches its holder) is CTRL-STOP-REACHES-HOLDER's own failure.
    assert "RELEASE-NOT-COMPLETE" not in FOUNDATION
    failure = AssertionError("stop never reached its holder")
    explain(failure, ReleaseCompletes)
    assert notes_blame(failure) == ()


def test_a_correct_store_leaves_the_failure_as_it_was() -> None:
    failure = AssertionError("a real controller-level finding")
    explain(failure, memory.make_store)
    assert notes_blame(failure) == ()
    assert not getattr(failure, "__notes__", [])


def test_a_failure_that_already_names_its_clause_keeps_it() -> None:
    failure = AssertionError("x")
    blame(failure, ("CTRL-PLUGS-IN",))
    explain(failure, CreateResetsVersion)
    assert failure.__notes__ == [BLAME_NOTE + "CTRL-PLUGS-IN"]
