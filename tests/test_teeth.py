"""Every contract check has teeth: for each clause, a broken store makes it fail.

For every (clause, broken store) pair in ``broken_stores.BROKEN`` the contract
tests that declare the clause are run against the broken store, bypassing the
factory's shape check so even a mis-shaped store reaches the test body. At
least one must fail. The reverse direction is covered too: the in-memory
store, from which every broken store is derived, passes all of them
(tests/test_memory_store.py), so the failure is caused by the one mistake.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest
from broken_stores import BROKEN

from chongming_conformance import contract as contract_package
from chongming_conformance.clauses import CLAUSES, Scope, clauses_of
from chongming_conformance.contract import StoreContract
from chongming_conformance.protocol import TaskStore

#: The contract's own source files (one module per protocol group).
CONTRACT_DIR = Path(contract_package.__file__).resolve().parent


def contract_tests_for(clause_id: str) -> list[str]:
    """Names of the StoreContract test methods that declare ``clause_id``."""
    return [
        name
        for name in dir(StoreContract)
        if name.startswith("test_") and clause_id in clauses_of(getattr(StoreContract, name))
    ]


def run_contract_test(name: str, make: Callable[[], object]) -> BaseException | None:
    """Run one contract test against a store from ``make``; return its failure, if any."""
    contract = StoreContract()
    contract._stack = contextlib.ExitStack()
    store = make()
    contract.store = store  # type: ignore[assignment]  # deliberately unchecked shape
    contract.make_store = make  # type: ignore[method-assign]
    try:
        getattr(contract, name)()
    except Exception as exc:
        return exc
    finally:
        with contextlib.suppress(Exception):
            contract._stack.close()
        with contextlib.suppress(Exception):
            store.close()  # type: ignore[attr-defined]
    return None


CASES = [
    pytest.param(clause_id, broken, id=f"{clause_id}-{broken.__name__}")
    for clause_id, stores in BROKEN.items()
    for broken in stores
]


@pytest.mark.parametrize(("clause_id", "broken"), CASES)
def test_broken_store_is_caught_by_its_clause(clause_id: str, broken: type) -> None:
    names = contract_tests_for(clause_id)
    assert names, f"no contract test declares {clause_id}"
    failures = {name: run_contract_test(name, broken) for name in names}
    caught = {n: e for n, e in failures.items() if e is not None}
    assert caught, (
        f"{broken.__name__} ({broken.__doc__}) violates {clause_id}, yet all of "
        f"{names} passed against it"
    )
    # The failure must come from the check, not from a crash in the harness itself.
    for exc in caught.values():
        frames = traceback.extract_tb(exc.__traceback__)
        assert any(Path(f.filename).parent == CONTRACT_DIR for f in frames), (
            f"{broken.__name__} failed outside the contract: {exc!r}"
        )


def test_every_contract_clause_has_a_broken_store() -> None:
    contract_scope = {c.id for c in CLAUSES.values() if c.scope is Scope.CONTRACT}
    missing = sorted(contract_scope - set(BROKEN))
    assert not missing, f"contract clauses without a broken store: {missing}"
    unknown = sorted(set(BROKEN) - set(CLAUSES))
    assert not unknown, f"BROKEN names unknown clauses: {unknown}"


def test_broken_stores_are_still_shaped_like_stores_where_they_should_be() -> None:
    """Only the PROTOCOL-METHODS stores may differ in shape; the rest isolate one mistake."""
    for clause_id, stores in BROKEN.items():
        for broken in stores:
            store = broken()
            try:
                if clause_id != "PROTOCOL-METHODS":
                    assert isinstance(store, TaskStore), broken.__name__
            finally:
                store.close()


def _contract_test_names() -> list[str]:
    return sorted(n for n in dir(StoreContract) if n.startswith("test_"))


@pytest.mark.parametrize("name", _contract_test_names())
def test_every_contract_test_is_filed_under_a_clause_it_proves(name: str) -> None:
    """Filing audit: a test declaring clause C fails on one of C's broken stores.

    A test that passes on every store breaking the clause it is filed under proves
    something else (a never-claimed release filed under RELEASE-FINISHED-NOOP, say),
    and its failures would be reported against the wrong clause.
    """
    declared = clauses_of(getattr(StoreContract, name))
    for clause_id in declared:
        stores = BROKEN.get(clause_id, ())
        if not stores:
            continue
        caught = [s.__name__ for s in stores if run_contract_test(name, s) is not None]
        assert caught, (
            f"{name} is filed under {clause_id}, but passes on every store breaking it: "
            f"{[s.__name__ for s in stores]}"
        )
