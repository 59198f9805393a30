"""The one seam of the single-connection bases: how stores are opened, wrapped and torn down.

StoreContract, StoreProperties and StoreStateMachineTests must all honour the
same hooks (``make_store``, ``wrap_store``, ``guard``), close the store before
the factory's own teardown; a contract's ``open_store`` override decides its store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from hypothesis import settings

from chongming_conformance.checking.contract import StoreContract
from chongming_conformance.checking.properties import StoreProperties
from chongming_conformance.checking.stateful import StoreStateMachineTests
from chongming_conformance.protocol import TaskStore
from chongming_conformance.seam import OPEN_STEP, TEARDOWN_STEP, StoreSeam
from chongming_conformance.seam.timeouts import TimeoutProxy, unwrap
from chongming_conformance.strategies.samples import snapshot
from reference_stores.memory import InMemoryTaskStore

T = TypeVar("T")

FEW = settings(max_examples=3, stateful_step_count=5, deadline=None, database=None,
               derandomize=True)


class RecordingStore(InMemoryTaskStore):
    """A memory store that writes its close() into a shared event log."""

    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def close(self) -> None:
        self.events.append("store.close")
        super().close()


class Recorder:
    """Hooks for every base: a generator factory, a wrap and a guard, all logged."""

    events: list[str]

    def make_store(self) -> Any:
        def factory() -> Iterator[RecordingStore]:
            self.events.append("factory.enter")
            yield RecordingStore(self.events)
            self.events.append("factory.teardown")

        return factory()

    def wrap_store(self, store: TaskStore) -> TaskStore:
        self.events.append("wrap")
        proxy: TaskStore = TimeoutProxy(store, 0)
        return proxy

    def guard(self, what: str, step: Callable[[], T]) -> T:
        self.events.append(f"guard {what}")
        return step()


class RecordingSeam(Recorder, StoreSeam):
    def __init__(self) -> None:
        self.events = []


ONE_LIFECYCLE = [
    f"guard {OPEN_STEP}",
    "factory.enter",
    "wrap",
    f"guard {TEARDOWN_STEP}",
    "store.close",
    "factory.teardown",
]


def test_opened_store_opens_wraps_and_closes_before_the_factory_teardown() -> None:
    seam = RecordingSeam()
    with seam.opened_store() as store:
        assert isinstance(store, TimeoutProxy), "wrap_store() was not applied"
        store.create(snapshot("t-1"))
        assert store.get("t-1") is not None
    assert seam.events == ONE_LIFECYCLE


def test_opened_store_tears_down_when_the_body_fails() -> None:
    seam = RecordingSeam()
    with pytest.raises(RuntimeError, match="body"), seam.opened_store():
        raise RuntimeError("body")
    assert seam.events == ONE_LIFECYCLE


def test_make_store_is_required() -> None:
    with pytest.raises(NotImplementedError, match=r"StoreSeam must implement make_store\(\)"):
        StoreSeam().make_store()


class RecordingContract(Recorder, StoreContract):
    pass


def test_contract_uses_the_seam_for_its_store_and_every_extra_one() -> None:
    contract = RecordingContract()
    contract.events = []
    contract.setup_method()
    assert isinstance(contract.store, TimeoutProxy)
    other = contract.open_store()
    assert unwrap(other) is not unwrap(contract.store), "open_store() must open a new store"
    contract.teardown_method()
    opened = [f"guard {OPEN_STEP}", "factory.enter", "wrap"]
    # One guarded teardown closes both stores (newest first), each before its factory.
    assert contract.events == [
        *opened,
        *opened,
        f"guard {TEARDOWN_STEP}",
        "store.close",
        "factory.teardown",
        "store.close",
        "factory.teardown",
    ]


class OldStyleContract(StoreContract):
    """A subclass that overrides open_store(), the contract's way to open one more store."""

    def make_store(self) -> InMemoryTaskStore:
        return InMemoryTaskStore()

    def open_store(self) -> TaskStore:
        proxy: TaskStore = TimeoutProxy(super().open_store(), 0)
        return proxy


def test_an_open_store_override_still_decides_the_store_under_test() -> None:
    contract = OldStyleContract()
    contract.setup_method()
    try:
        assert isinstance(contract.store, TimeoutProxy)
    finally:
        contract.teardown_method()
    inner = unwrap(contract.store)
    assert isinstance(inner, InMemoryTaskStore) and inner._closed, "teardown did not close it"


class RecordingProperties(Recorder, StoreProperties):
    hypothesis_settings = FEW


def test_properties_open_every_example_through_the_seam() -> None:
    props = RecordingProperties()
    props.events = []
    props.test_counts_match_model()
    examples = props.events.count("factory.enter")
    assert examples >= 1
    assert props.events == ONE_LIFECYCLE * examples


class RecordingMachine(Recorder, StoreStateMachineTests):
    hypothesis_settings = FEW


def test_state_machine_runs_open_and_close_through_the_seam() -> None:
    tests = RecordingMachine()
    tests.events = []
    tests.test_state_machine()
    runs = tests.events.count("factory.enter")
    assert runs >= 1
    # The machine may call close() itself late in a run; only the seam's close counts here.
    seam_events: list[str] = []
    for event in tests.events:
        if event != "store.close" or seam_events[-1] == f"guard {TEARDOWN_STEP}":
            seam_events.append(event)
    assert seam_events == ONE_LIFECYCLE * runs
