"""Turning what an author hands the kit into an open store, with precise errors.

This module is the only place that unwraps a factory: :func:`enter_store` for
the single-connection suites, :func:`enter_opener` for the shared-store
factories of the cross-process clauses (plugin check, suite and stress
harness alike), and :func:`picklability_problem`, the one test of whether an
opener can reach a worker process. Three factory forms are accepted, all
called with no arguments:

* a callable returning a store;
* a generator function yielding one store (code after ``yield`` is teardown);
* a callable returning a context manager whose ``__enter__`` gives the store.

The kit always calls ``store.close()`` itself, before any teardown of the
factory, so an author never has to remember it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Generator
from typing import Any

from ..protocol import PROTOCOL_METHODS, TaskStore

__all__ = [
    "StoreShapeError",
    "enter_opener",
    "enter_store",
    "picklability_problem",
    "protocol_mismatches",
    "signature_advisories",
]


class StoreShapeError(TypeError):
    """The object is not shaped like a TaskStore; the message lists every mismatch."""


@functools.cache
def _expected_signature(name: str) -> inspect.Signature:
    return inspect.signature(getattr(TaskStore, name))


def _describe(param: inspect.Parameter) -> str:
    kind = "keyword-only" if param.kind is inspect.Parameter.KEYWORD_ONLY else "positional"
    default = "" if param.default is inspect.Parameter.empty else f"={param.default!r}"
    return f"{kind} {param.name!r}{default}"


#: Signature problems of a bound method's function, by (protocol name, function). The
#: seam opens a store per test and per hypothesis example, and re-inspecting the same
#: class's 14 signatures each time was about 5 % of a property run on the memory store.
_PROBLEMS_BY_FUNCTION: dict[tuple[str, object], tuple[str, ...]] = {}


def _signature_problems(name: str, method: Any) -> list[str]:
    """:func:`_uncached_signature_problems`, remembered per class for bound methods.

    A bound method's signature is its function's without the first parameter, so
    every instance of a class gives the same answer; other callables (a partial, a
    callable object, a function set on the instance) are inspected every time.
    """
    function = getattr(method, "__func__", None) if inspect.ismethod(method) else None
    if function is None:
        return _uncached_signature_problems(name, method)
    key = (name, function)
    found = _PROBLEMS_BY_FUNCTION.get(key)
    if found is None:
        found = _PROBLEMS_BY_FUNCTION[key] = tuple(_uncached_signature_problems(name, method))
    return list(found)


def _uncached_signature_problems(name: str, method: Any) -> list[str]:
    try:
        actual = inspect.signature(method)
    except (TypeError, ValueError):
        return []  # builtins without signatures: nothing we can check
    expected = _expected_signature(name)
    problems: list[str] = []
    params = dict(actual.parameters)
    has_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for pname, exp in expected.parameters.items():
        if pname == "self":
            continue
        got = params.get(pname)
        if got is None:
            if not has_var_kw or exp.kind is not inspect.Parameter.KEYWORD_ONLY:
                problems.append(f"{name}() lacks {_describe(exp)}")
            continue
        if exp.kind is inspect.Parameter.KEYWORD_ONLY and got.kind not in (
            inspect.Parameter.KEYWORD_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            problems.append(f"{name}() has {pname!r} as {got.kind.description}, expected keyword")
        if exp.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and got.kind is (
            inspect.Parameter.KEYWORD_ONLY
        ):
            problems.append(f"{name}() makes {pname!r} keyword-only; the protocol passes it "
                            "positionally")
        if exp.default is not inspect.Parameter.empty and got.default is inspect.Parameter.empty:
            problems.append(f"{name}() requires {pname!r}; the protocol makes it optional "
                            f"(default {exp.default!r})")
        elif exp.default is not inspect.Parameter.empty and got.default != exp.default:
            # A caller that leaves it out gets a different answer (limit=3 claims 3, not 50).
            problems.append(f"{name}() defaults {pname!r} to {got.default!r}; the protocol's "
                            f"default is {exp.default!r}")
    for pname, got in params.items():
        if pname in expected.parameters or got.kind in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            continue
        if got.default is inspect.Parameter.empty:
            problems.append(
                f"{name}() requires extra parameter {pname!r} the protocol never passes"
            )
    return problems


def protocol_mismatches(obj: object) -> list[str]:
    """Every way ``obj`` differs from the TaskStore protocol ('[]' if none).

    Missing methods come first, then signature mismatches, e.g.
    ``save() lacks keyword-only 'expect_version'``.
    """
    missing = [name for name in PROTOCOL_METHODS if not callable(getattr(obj, name, None))]
    problems = [f"missing method {name}()" for name in missing]
    for name in PROTOCOL_METHODS:
        if name in missing:
            continue
        problems.extend(_signature_problems(name, getattr(obj, name)))
    return problems


def signature_advisories(obj: object) -> list[str]:
    """Looser-than-protocol signatures that still work for the controller ('[]' if none).

    A parameter the protocol makes keyword-only but the store also accepts
    positionally, or a keyword-only parameter swallowed by ``**kwargs``: every
    call the controller makes still works, but a typo or a positional call that
    should fail does not (the SHOULD clause PROTOCOL-KEYWORD-ONLY).
    """
    advice: list[str] = []
    for name in PROTOCOL_METHODS:
        method = getattr(obj, name, None)
        if not callable(method):
            continue
        try:
            params = inspect.signature(method).parameters
        except (TypeError, ValueError):
            continue
        for pname, exp in _expected_signature(name).parameters.items():
            if exp.kind is not inspect.Parameter.KEYWORD_ONLY:
                continue
            got = params.get(pname)
            if got is None and any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
            ):
                advice.append(f"{name}() takes keyword-only {pname!r} through **kwargs; "
                              f"declare it: *, {pname}")
            elif got is not None and got.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
                advice.append(f"{name}() accepts {pname!r} positionally; the protocol makes "
                              "it keyword-only (add * before it)")
    return advice


def _check_store(obj: object, origin: str) -> TaskStore:
    problems = protocol_mismatches(obj)
    if problems:
        raise StoreShapeError(
            f"{origin} gave {type(obj).__module__}.{type(obj).__qualname__}, which is not a "
            "TaskStore: " + "; ".join(problems)
        )
    assert isinstance(obj, TaskStore)
    return obj


def _is_context_manager(obj: object) -> bool:
    # A class defining __enter__ is a callable (an opener, say), not a context manager.
    return not isinstance(obj, type) and hasattr(obj, "__enter__") and hasattr(obj, "__exit__")


def _first_yield(gen: Generator[Any, None, None], stack: contextlib.ExitStack, origin: str) -> Any:
    """The generator's one yielded value; resuming it past ``yield`` is registered on ``stack``."""
    try:
        value = next(gen)
    except StopIteration:
        raise StoreShapeError(
            f"{origin} is a generator that returned without yielding anything; it must yield "
            "exactly once (code after the yield is its teardown)"
        ) from None

    def finish() -> None:
        with contextlib.suppress(StopIteration):
            next(gen)
            raise RuntimeError(f"{origin} yielded more than once")

    stack.callback(finish)
    return value


def enter_store(
    factory: Callable[[], Any], stack: contextlib.ExitStack, *, origin: str = "the factory"
) -> TaskStore:
    """Call ``factory`` and return an open store; teardown is registered on ``stack``.

    ``stack`` unwinds in reverse: ``store.close()`` first, then the factory's own
    teardown (generator code after ``yield``, or ``__exit__``). A store that is
    also a context manager is used as it is, not entered.
    """
    produced = factory()
    if isinstance(produced, Generator):
        store_obj = _first_yield(produced, stack, origin)
    elif not protocol_mismatches(produced):
        store_obj = produced
    elif _is_context_manager(produced):
        store_obj = stack.enter_context(produced)
    else:
        store_obj = produced
    store = _check_store(store_obj, origin)
    stack.callback(_close_blamed, store)
    return store


def _close_blamed(store: TaskStore) -> None:
    """``store.close()`` at teardown; a failure is evidence against CLOSE-IDEMPOTENT (the
    tests may have closed it already, and close() must then still succeed), not against
    whatever the test was checking."""
    from ..oracle.blame import blamed  # blame imports the model; keep factory light to import

    blamed(("CLOSE-IDEMPOTENT",), store.close)


def enter_opener(
    factory: Callable[[], Any],
    stack: contextlib.ExitStack,
    *,
    origin: str = "make_shared_store()",
) -> Callable[[], Any]:
    """Call a ``make_shared_store`` factory (any form :func:`enter_store` takes); return its opener.

    The opener must be a zero-argument callable that opens a *new* store on the
    shared location each time it is called; the factory's teardown runs when
    ``stack`` unwinds (after every worker is gone). Whether it can reach a
    worker process is :func:`picklability_problem`'s question, asked separately.
    """
    produced = factory()
    if isinstance(produced, Generator):
        opener = _first_yield(produced, stack, origin)
    elif _is_context_manager(produced):
        opener = stack.enter_context(produced)
    else:
        opener = produced
    if not isinstance(opener, type) and not protocol_mismatches(opener):
        # (A store class is a fine opener: calling it opens a store.)
        raise StoreShapeError(
            f"{origin} gave a store ({type(opener).__qualname__}), not an opener: return a "
            "zero-argument callable that opens a new store on the shared location, e.g. "
            "functools.partial(MyStore, path)"
        )
    if not callable(opener):
        raise StoreShapeError(
            f"{origin} gave {opener!r} ({type(opener).__name__}), which is not callable; it "
            "must give a zero-argument opener"
        )
    result: Callable[[], Any] = opener
    return result


def picklability_problem(opener: Callable[[], Any]) -> str | None:
    """Why ``opener`` cannot be shipped to a spawned worker process, or None if it can.

    Uses the pickler the stress harness sends openers with (``multiprocess``'s
    dill-based ForkingPickler), so the plugin's configure-time check and the
    harness can never disagree: dill ships a lambda by value, but not an open
    connection.
    """
    from multiprocess.reduction import ForkingPickler  # heavy; only the sharing paths need it

    try:
        ForkingPickler.dumps(opener)
    except Exception as exc:
        return (
            f"the opener {opener!r} cannot be pickled, so it cannot be sent to a spawned "
            f"process ({type(exc).__name__}: {exc}); make it a module-level callable or "
            "functools.partial of one, holding only plain configuration (a path, a DSN, a "
            "schema name)"
        )
    return None
