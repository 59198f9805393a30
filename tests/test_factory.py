"""factory.py: the one place factories become stores or openers, and openers are checked."""

from __future__ import annotations

import contextlib
import functools
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chongming_conformance.seam.factory import (
    StoreShapeError,
    enter_opener,
    enter_store,
    picklability_problem,
)
from reference_stores.memory import InMemoryTaskStore


def _opener_with(conn: object) -> InMemoryTaskStore:
    return InMemoryTaskStore()


@contextlib.contextmanager
def cm_opener() -> Iterator[Callable[[], Any]]:
    yield functools.partial(InMemoryTaskStore)


def test_every_factory_form_gives_an_opener_and_tears_down_in_order() -> None:
    events: list[str] = []

    def gen() -> Iterator[Callable[[], Any]]:
        events.append("setup")
        yield InMemoryTaskStore
        events.append("teardown")

    for factory in (gen, cm_opener, lambda: functools.partial(InMemoryTaskStore)):
        with contextlib.ExitStack() as stack:
            opener = enter_opener(factory, stack)
            assert isinstance(opener(), InMemoryTaskStore)
    assert events == ["setup", "teardown"]


def test_a_generator_that_yields_nothing_is_named_not_a_stopiteration() -> None:
    def empty() -> Iterator[Any]:
        return
        yield

    for enter in (enter_opener, enter_store):
        with contextlib.ExitStack() as stack, pytest.raises(
            StoreShapeError, match="returned without yielding anything"
        ):
            enter(empty, stack, origin="f()")


def test_a_generator_that_yields_twice_fails_at_teardown() -> None:
    def twice() -> Iterator[Any]:
        yield InMemoryTaskStore
        yield InMemoryTaskStore

    # The stack unwinds (resuming the generator) before pytest.raises checks.
    expected = pytest.raises(RuntimeError, match=r"f\(\) yielded more than once")
    with expected, contextlib.ExitStack() as stack:
        enter_opener(twice, stack, origin="f()")


def test_a_store_or_a_non_callable_is_not_an_opener() -> None:
    with contextlib.ExitStack() as stack, pytest.raises(StoreShapeError, match="not an opener"):
        enter_opener(InMemoryTaskStore, stack)
    with contextlib.ExitStack() as stack, pytest.raises(StoreShapeError, match="not callable"):
        enter_opener(lambda: "/tmp/db", stack)


def test_picklability_uses_the_harness_pickler() -> None:
    assert picklability_problem(functools.partial(InMemoryTaskStore)) is None
    # dill ships a lambda by value, as the harness will: not a problem.
    assert picklability_problem(lambda: InMemoryTaskStore()) is None
    conn = sqlite3.connect(":memory:")
    try:
        problem = picklability_problem(functools.partial(_opener_with, conn))
    finally:
        conn.close()
    assert problem is not None
    assert "cannot be pickled" in problem and "functools.partial" in problem


def test_a_wrong_default_is_a_protocol_mismatch_and_a_loose_signature_only_advice() -> None:
    from broken_stores import ClaimLimitDefaultThree, ExpectVersionNotKeywordOnly

    from chongming_conformance.seam.factory import protocol_mismatches, signature_advisories

    assert protocol_mismatches(ClaimLimitDefaultThree()) == [
        "claim_commands() defaults 'limit' to 3; the protocol's default is 50"
    ]
    loose = ExpectVersionNotKeywordOnly()
    assert protocol_mismatches(loose) == []
    assert signature_advisories(loose) == [
        "save() accepts 'expect_version' positionally; the protocol makes it keyword-only "
        "(add * before it)"
    ]


def test_signature_checks_are_remembered_per_class_not_per_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seam opens a store per example: a class's 14 signatures are inspected once,
    while a method replaced on one instance is still inspected on its own."""
    from broken_stores import ClaimLimitDefaultThree

    from chongming_conformance.seam import factory

    inspected: list[str] = []
    real = factory._uncached_signature_problems

    def counting(name: str, method: Any) -> list[str]:
        inspected.append(name)
        return real(name, method)

    monkeypatch.setattr(factory, "_uncached_signature_problems", counting)
    monkeypatch.setattr(factory, "_PROBLEMS_BY_FUNCTION", {})
    assert factory.protocol_mismatches(InMemoryTaskStore()) == []
    assert len(inspected) == 14
    assert factory.protocol_mismatches(InMemoryTaskStore()) == []
    assert len(inspected) == 14  # the second instance of the class: nothing re-inspected
    # Another class with the same method names keeps its own answer.
    assert factory.protocol_mismatches(ClaimLimitDefaultThree()) == [
        "claim_commands() defaults 'limit' to 3; the protocol's default is 50"
    ]
    patched = InMemoryTaskStore()

    def claim_commands(*, now: Any, lease_seconds: float, limit: int = 3) -> Any:
        raise AssertionError("never called")

    patched.claim_commands = claim_commands  # type: ignore[method-assign]
    assert factory.protocol_mismatches(patched) == [
        "claim_commands() defaults 'limit' to 3; the protocol's default is 50"
    ]
    assert factory.protocol_mismatches(InMemoryTaskStore()) == []
