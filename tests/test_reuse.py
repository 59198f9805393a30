"""The reset_store seam (chongming_conformance.seam.reuse): one store per process, emptied and
checked between uses; never a store that was closed, cut off, or not emptied."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from hypothesis import settings

from chongming_conformance.checking.contract import StoreContract
from chongming_conformance.checking.properties import StoreProperties
from chongming_conformance.checking.stateful import StoreStateMachineTests
from chongming_conformance.seam.reuse import (
    StoreReuse,
    StoreReuseError,
    check_reset,
    leftovers,
    shutdown_all,
)
from chongming_conformance.seam.timeouts import StoreCallTimeout, unwrap
from chongming_conformance.strategies.samples import command, snapshot
from reference_stores.memory import InMemoryTaskStore

FEW = settings(max_examples=15, stateful_step_count=20, deadline=None, database=None,
               derandomize=True)


def empty_it(store: Any) -> None:
    """A correct reset for the in-memory store."""
    inner = unwrap(store)
    assert isinstance(inner, InMemoryTaskStore)
    inner._tasks.clear()
    inner._history.clear()
    inner._commands.clear()


def keep_commands(store: Any) -> None:
    """A reset that forgets the commands: the kind of bug the emptiness check exists for."""
    inner = unwrap(store)
    assert isinstance(inner, InMemoryTaskStore)
    inner._tasks.clear()
    inner._history.clear()


@pytest.fixture(autouse=True)
def _forget_kept_stores() -> Iterator[None]:
    yield
    shutdown_all()


class Counting:
    """A factory that counts the stores it opens and the teardowns it runs."""

    def __init__(self) -> None:
        self.opened: list[InMemoryTaskStore] = []
        self.torn_down = 0

    def make(self) -> Iterator[InMemoryTaskStore]:
        store = InMemoryTaskStore()
        self.opened.append(store)
        yield store
        self.torn_down += 1

    def reuser(self, reset: Any = empty_it) -> StoreReuse:
        from chongming_conformance.seam.factory import enter_store

        return StoreReuse(lambda stack: enter_store(self.make, stack), reset, "reset_store")


def use(reuser: StoreReuse) -> Any:
    with contextlib.ExitStack() as stack:
        store = reuser.acquire(stack)
        return store


def test_a_kept_store_is_reset_and_handed_out_again() -> None:
    factory = Counting()
    reuser = factory.reuser()
    with contextlib.ExitStack() as stack:
        store = reuser.acquire(stack)
        store.create(snapshot("t1"))
        store.submit_command(command("c1", "t1"))
    with contextlib.ExitStack() as stack:
        again = reuser.acquire(stack)
        assert unwrap(again) is factory.opened[0]
        assert leftovers(again) == []
        assert again.get("t1") is None
        again.create(snapshot("t1"))  # the same id is free again
    assert len(factory.opened) == 1 and reuser.reused == 1 and factory.torn_down == 0
    reuser.shutdown()
    assert factory.torn_down == 1 and factory.opened[0]._closed


def test_a_reset_that_leaves_rows_is_a_usage_error_naming_them() -> None:
    factory = Counting()
    reuser = factory.reuser(keep_commands)
    with contextlib.ExitStack() as stack:
        reuser.acquire(stack).submit_command(command("c-left", "t1", created=0))
    with pytest.raises(StoreReuseError, match=r"did not empty the store: claim_commands\(\) "
                       r"still returns command\(s\) \['c-left'\]"):
        use(reuser)
    assert factory.torn_down == 1, "the dirty store must be discarded, never handed out"


def test_a_reset_that_raises_is_a_usage_error() -> None:
    def broken(store: Any) -> None:
        raise RuntimeError("no such table")

    factory = Counting()
    reuser = factory.reuser(broken)
    use(reuser)
    with pytest.raises(StoreReuseError, match="raised RuntimeError: no such table"):
        use(reuser)


def test_a_store_the_check_closed_is_never_reused() -> None:
    factory = Counting()
    reuser = factory.reuser()
    with contextlib.ExitStack() as stack:
        reuser.acquire(stack).close()
    assert factory.torn_down == 1
    use(reuser)
    assert len(factory.opened) == 2


def test_a_store_whose_call_was_cut_off_is_never_reused() -> None:
    factory = Counting()
    reuser = factory.reuser()
    use(reuser)

    def hangs(*args: Any, **kwargs: Any) -> Any:
        raise StoreCallTimeout("history()", 1.0)  # what the per-call timeout raises

    factory.opened[0].history = hangs  # type: ignore[method-assign]
    with contextlib.ExitStack() as stack:
        store = reuser.acquire(stack)
        with pytest.raises(StoreCallTimeout):
            store.history("t1")
    assert factory.opened[0]._closed and factory.torn_down == 1, "a cut-off store was kept"
    use(reuser)
    assert len(factory.opened) == 2


def test_check_reset_proves_the_seam_on_a_populated_store() -> None:
    assert check_reset(InMemoryTaskStore(), empty_it) == []
    left = check_reset(InMemoryTaskStore(), keep_commands)
    assert left and "claim_commands()" in left[0]


def test_the_store_seen_by_a_check_has_the_stores_signatures() -> None:
    from chongming_conformance.seam.factory import protocol_mismatches

    factory = Counting()
    with contextlib.ExitStack() as stack:
        store = factory.reuser().acquire(stack)
        assert protocol_mismatches(store) == []


# -- through the single-connection bases ---------------------------------------------------
class Reused:
    """Seam hooks of a subclass that opts into reuse."""

    factory: ClassVar[Counting]

    def make_store(self) -> Any:
        return type(self).factory.make()

    def reset_function(self) -> Any:
        return empty_it


class ReusedContract(Reused, StoreContract):
    pass


def test_the_contract_opens_one_store_for_many_tests() -> None:
    ReusedContract.factory = factory = Counting()
    names = [n for n in dir(StoreContract) if n.startswith("test_")][:12]
    for name in names:
        contract = ReusedContract()
        contract.setup_method()
        try:
            getattr(contract, name)()
        finally:
            contract.teardown_method()
    # Every test that closes its store (the close clauses) costs one more.
    assert 1 <= len(factory.opened) < len(names) // 2, len(factory.opened)


class ReusedProperties(Reused, StoreProperties):
    hypothesis_settings = FEW


def test_every_property_example_gets_an_empty_store_from_one_factory_call() -> None:
    ReusedProperties.factory = factory = Counting()
    ReusedProperties().test_query_matches_model()
    ReusedProperties().test_prune_matches_model()
    assert len(factory.opened) == 1


class ReusedMachine(Reused, StoreStateMachineTests):
    hypothesis_settings = settings(FEW, max_examples=40)


def test_the_state_machine_closes_a_reused_store_in_few_runs() -> None:
    ReusedMachine.factory = factory = Counting()
    ReusedMachine().test_state_machine()
    # A run that closes its store makes the next one open a new store; with reuse only
    # about one run in ten may close (REUSED_CLOSE_ODDS), so most runs share a store.
    assert len(factory.opened) <= 10, len(factory.opened)
