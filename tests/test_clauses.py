"""The clause catalogue and the checks stay in step, in both directions.

* every check names only known clauses (``checks`` enforces it at import);
* every contract test declares at least one clause;
* every contract-scope clause is checked by the contract (or a property);
* every cross-process clause is checked by a stress scenario (or, for
  ``XP-CTRL-*``, by the controller checks);
* every controller-scope clause is checked by ``ControllerContract``, whose
  tests are named after the clause they check;
* the backend guide's method table equals the protocol's method set.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

from chongming_conformance.checking.contract import StoreContract
from chongming_conformance.checking.controller import ControllerContract
from chongming_conformance.protocol import PROTOCOL_METHODS
from chongming_conformance.protocol.clauses import CLAUSES, Level, Scope, checks, clauses_of

ROOT = Path(__file__).resolve().parent.parent
CHECK_MODULES = (
    "chongming_conformance.checking.contract",
    "chongming_conformance.checking.properties",
    "chongming_conformance.checking.stateful",
    "chongming_conformance.stress",
    "chongming_conformance.checking.controller",
)


def declared_clauses() -> dict[str, set[str]]:
    """clause id -> qualified names of the kit's checks that declare it."""
    found: dict[str, set[str]] = {}

    def visit(obj: object, qualname: str) -> None:
        for cid in clauses_of(obj):
            found.setdefault(cid, set()).add(qualname)

    for modname in CHECK_MODULES:
        module = importlib.import_module(modname)
        for submodule in [module, *_submodules(module)]:
            for name, obj in vars(submodule).items():
                visit(obj, f"{submodule.__name__}.{name}")
                if inspect.isclass(obj):
                    for attr, member in vars(obj).items():
                        visit(member, f"{submodule.__name__}.{name}.{attr}")
    return found


def _submodules(module: object) -> list[object]:
    path = getattr(module, "__path__", None)
    if path is None:
        return []
    import pkgutil

    return [
        importlib.import_module(f"{module.__name__}.{info.name}")  # type: ignore[attr-defined]
        for info in pkgutil.iter_modules(path)
    ]


def test_clause_ids_are_well_formed() -> None:
    for cid, clause in CLAUSES.items():
        assert re.fullmatch(r"[A-Z]+(-[A-Z0-9]+)+", cid), cid
        assert clause.id == cid
        assert clause.level in (Level.MUST, Level.SHOULD)
        assert clause.text.endswith("."), f"{cid}: one sentence, ending with a period"
        assert clause.section, cid
        assert (clause.scope is Scope.CROSS_PROCESS) == cid.startswith("XP-"), cid


def test_unknown_clause_is_refused_at_decoration() -> None:
    try:
        checks("NO-SUCH-CLAUSE")
    except KeyError as exc:
        assert "NO-SUCH-CLAUSE" in str(exc)
    else:
        raise AssertionError("checks() accepted an unknown clause id")


def test_every_contract_test_declares_a_clause() -> None:
    tests = [n for n in dir(StoreContract) if n.startswith("test_")]
    assert len(tests) > 50
    bare = [n for n in tests if not clauses_of(getattr(StoreContract, n))]
    assert not bare, f"contract tests without @checks: {bare}"
    for name in tests:
        first = clauses_of(getattr(StoreContract, name))[0]
        stem = first.lower().replace("-", "_")
        assert name.startswith(f"test_{stem}__"), f"{name} must be named after {first}"


def test_every_checkable_clause_has_a_check() -> None:
    found = declared_clauses()
    unknown = sorted(set(found) - set(CLAUSES))
    assert not unknown, f"checks name unknown clauses: {unknown}"
    missing = sorted(
        c.id for c in CLAUSES.values() if c.scope is not Scope.REVIEW and c.id not in found
    )
    assert not missing, f"clauses with no check in the kit: {missing}"


def test_contract_clauses_are_checked_by_the_contract_itself() -> None:
    in_contract = {
        cid
        for name in dir(StoreContract)
        if name.startswith("test_")
        for cid in clauses_of(getattr(StoreContract, name))
    }
    contract_scope = {c.id for c in CLAUSES.values() if c.scope is Scope.CONTRACT}
    assert contract_scope <= in_contract, sorted(contract_scope - in_contract)
    assert not {c for c in in_contract if CLAUSES[c].scope is not Scope.CONTRACT}


def test_backend_guide_method_table_equals_protocol() -> None:
    guide = (ROOT / "docs" / "backend-guide.md").read_text(encoding="utf-8")
    table = guide.split("<!-- method-table -->")[1].split("<!-- /method-table -->")[0]
    documented = set(re.findall(r"^\|[^|]*\|\s*`(\w+)\(", table, flags=re.MULTILINE))
    assert documented == set(PROTOCOL_METHODS), (
        f"in guide only: {sorted(documented - set(PROTOCOL_METHODS))}; "
        f"in protocol only: {sorted(set(PROTOCOL_METHODS) - documented)}"
    )


def test_backend_guide_cites_every_clause() -> None:
    guide = (ROOT / "docs" / "backend-guide.md").read_text(encoding="utf-8")
    missing = sorted(cid for cid in CLAUSES if f"`{cid}`" not in guide)
    assert not missing, f"clauses the backend guide never mentions: {missing}"


def test_controller_clauses_are_checked_by_the_controller_contract() -> None:
    tests = [n for n in dir(ControllerContract) if n.startswith("test_")]
    bare = [n for n in tests if not clauses_of(getattr(ControllerContract, n))]
    assert not bare, f"controller tests without @checks: {bare}"
    for name in tests:
        first = clauses_of(getattr(ControllerContract, name))[0]
        stem = first.lower().replace("-", "_")
        assert name.startswith(f"test_{stem}__"), f"{name} must be named after {first}"
    declared = {cid for n in tests for cid in clauses_of(getattr(ControllerContract, n))}
    controller_scope = {c.id for c in CLAUSES.values() if c.scope is Scope.CONTROLLER}
    xp_ctrl = {c for c in CLAUSES if c.startswith("XP-CTRL-")}
    assert controller_scope | xp_ctrl == declared, sorted(declared ^ (controller_scope | xp_ctrl))


def _declarations() -> dict[str, tuple[str, ...]]:
    """qualified name of each check -> the clauses it declares."""
    by_check: dict[str, set[str]] = {}
    for cid, names in declared_clauses().items():
        for name in names:
            by_check.setdefault(name, set()).add(cid)
    return {name: tuple(sorted(cids)) for name, cids in by_check.items()}


def test_a_check_of_a_should_clause_declares_no_must_clause() -> None:
    """A SHOULD failure must never make a MUST clause NOT VERIFIED (and so fail the must
    gate): the one test that checks a SHOULD clause checks nothing else, and every check of
    MUST clauses accepts whatever a SHOULD leaves open (see stateful's prune and claim)."""
    mixed = {
        name: cids for name, cids in _declarations().items()
        if any(CLAUSES[c].level is Level.SHOULD for c in cids)
        and any(CLAUSES[c].level is Level.MUST for c in cids)
    }
    assert not mixed, f"checks declaring SHOULD and MUST clauses together: {mixed}"
