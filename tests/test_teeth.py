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
import json
import traceback
import unittest
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from broken_stores import (
    BROKEN,
    NamePadSpace,
    NameTruncatedAtNul,
    QueryBucketZeroIsNone,
    QueryTagSubstring,
    TagCaseFolded,
    TagMatchedAsEscapedJson,
    TaskIdPadSpace,
    _TextComparedAs,
)
from hypothesis import settings

from chongming_conformance.checking import contract as contract_package
from chongming_conformance.checking.contract import StoreContract
from chongming_conformance.checking.hypothesis_profiles import load_profile
from chongming_conformance.protocol import TaskStore
from chongming_conformance.protocol.alphabet import ESCAPED_CHARACTERS
from chongming_conformance.protocol.clauses import CLAUSES, Scope, clauses_of
from reference_stores.memory import InMemoryTaskStore

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
    except unittest.SkipTest:
        return None  # a skipped check caught nothing
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


@pytest.fixture
def thorough_for_large_prune(request: pytest.FixtureRequest) -> Iterator[None]:
    """PRUNE-LARGE's check runs under the thorough profile only: load it for that case."""
    params = request.node.callspec.params
    if params.get("clause_id") != "PRUNE-LARGE" and "prune_large" not in params.get("name", ""):
        yield
        return
    previous = settings.get_current_profile_name()
    load_profile("thorough")
    try:
        yield
    finally:
        settings.load_profile(previous)


@pytest.mark.parametrize(("clause_id", "broken"), CASES)
@pytest.mark.usefixtures("thorough_for_large_prune")
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
@pytest.mark.usefixtures("thorough_for_large_prune")
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


# -- the adversarial alphabet has no blind spot ------------------------------------------------
#: filter -> (the clause, the contract test that must catch a one-character bug in it).
ALPHABET_CHECKS = {
    "tag": ("QUERY-TAG-EXACT", "test_query_tag_exact__adversarial_values_match_only_themselves"),
    "name": ("QUERY-NAME-EXACT", "test_query_name_exact__adversarial_values_match_only_themselves"),
    "name_prefix": (
        "QUERY-NAME-PREFIX-LITERAL", "test_query_name_prefix_literal__adversarial_prefixes"
    ),
    "pipeline_run_id": (
        "QUERY-PIPELINE", "test_query_pipeline__adversarial_values_match_only_themselves"
    ),
}


def escapes_one_character_differently(filter_name: str, odd: str) -> type:
    """A store whose ``filter_name`` compares escaped text, escaped differently for ``odd`` only.

    The stored side is the codec's JSON escape; the query side writes ``odd`` as
    an upper-case ``\\uXXXX`` (what MariaDB's JSON_QUOTE does for U+000B), or raw
    where the codec's escape already is that.
    """
    upper = f"\\u{ord(odd):04X}"
    odd_escaped = odd if json.dumps(odd)[1:-1] == upper else upper

    def engine(text: str) -> str:
        return "".join(odd_escaped if ch == odd else json.dumps(ch)[1:-1] for ch in text)

    def codec(text: str) -> str:
        return json.dumps(text)[1:-1]

    attrs = {"filter": filter_name, "key": staticmethod(codec), "probe": staticmethod(engine),
             "__doc__": f"{filter_name} escaped differently for U+{ord(odd):04X} only"}
    return type(f"Escapes{ord(odd):04X}In_{filter_name}", (_TextComparedAs,), attrs)


@pytest.mark.parametrize("filter_name", list(ALPHABET_CHECKS))
@pytest.mark.parametrize("odd", ESCAPED_CHARACTERS, ids=lambda ch: f"U+{ord(ch):04X}")
def test_a_bug_limited_to_one_character_is_caught(filter_name: str, odd: str) -> None:
    """Every character of the alphabet, alone, is enough: the fixed samples hold them all."""
    clause_id, name = ALPHABET_CHECKS[filter_name]
    assert clause_id in clauses_of(getattr(StoreContract, name))
    broken = escapes_one_character_differently(filter_name, odd)
    failure = run_contract_test(name, broken)
    assert failure is not None, f"{broken.__doc__}: {name} passed"
    assert isinstance(failure, AssertionError), repr(failure)
    named = f"U+{ord(odd):04X}" if not "!" <= odd <= "~" else repr(odd)[1:-1]
    assert named in str(failure), f"the character is not shown: {failure}"


# -- failure messages show the values ----------------------------------------------------------
@pytest.mark.parametrize(
    ("broken", "name", "shown"),
    [
        (NamePadSpace, "test_query_name_exact__no_prefix_or_case_folding",
         "wrongly included: 't-4' name='build ' (U+0020 SPACE)"),
        (QueryTagSubstring, "test_query_tag_exact__no_substring_matches",
         "wrongly included: 't-1' tags={'ios'}"),
        (TagCaseFolded, "test_query_tag_exact__adversarial_values_match_only_themselves",
         "wrongly included: 'a-10' tags={'Build'}"),
        (TagMatchedAsEscapedJson, "test_query_tag_exact__adversarial_values_match_only_themselves",
         "missing:"),
        (QueryBucketZeroIsNone, "test_query_buckets__membership_zero_and_none",
         "missing:          't-0' bucket=None"),
        (TaskIdPadSpace, "test_get_missing_none__confusable_id_is_missing",
         "get('build ' (U+0020 SPACE))"),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_failure_message_shows_the_values(broken: type, name: str, shown: str) -> None:
    failure = run_contract_test(name, broken)
    assert failure is not None, f"{broken.__name__} passed {name}"
    assert shown in str(failure), f"expected {shown!r} in the message:\n{failure}"


# -- NUL, for a store that claims to hold it ---------------------------------------------------
ADVERSARIAL_TESTS = sorted(n for n in dir(StoreContract) if "adversarial" in n or "confusable" in n)


def _run_with_nul(name: str, make: Callable[[], object]) -> BaseException | None:
    contract = StoreContract()
    contract.text_holds_nul = True
    contract.make_store = make  # type: ignore[method-assign]
    contract.setup_method()
    try:
        getattr(contract, name)()
    except unittest.SkipTest:
        return None  # a skipped check caught nothing
    except Exception as exc:
        return exc
    finally:
        contract.teardown_method()
    return None


def test_nul_samples_pass_on_a_store_that_holds_nul() -> None:
    assert len(ADVERSARIAL_TESTS) >= 8, ADVERSARIAL_TESTS
    failures = {n: _run_with_nul(n, InMemoryTaskStore) for n in ADVERSARIAL_TESTS}
    assert not any(failures.values()), failures


def test_nul_samples_catch_c_string_truncation() -> None:
    failure = _run_with_nul(
        "test_query_name_exact__adversarial_values_match_only_themselves", NameTruncatedAtNul
    )
    assert failure is not None, "a name compared up to its first NUL passed"
    assert "U+0000 NUL" in str(failure), str(failure)
