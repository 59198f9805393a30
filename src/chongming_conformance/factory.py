"""Turning what an author hands the kit into an open store, with precise errors.

Three factory forms are accepted, all called with no arguments:

* a callable returning a store;
* a generator function yielding one store (code after ``yield`` is teardown);
* a callable returning a context manager whose ``__enter__`` gives the store.

The kit always calls ``store.close()`` itself, before any teardown of the
factory, so an author never has to remember it.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Generator
from typing import Any

from .protocol import PROTOCOL_METHODS, TaskStore

__all__ = ["StoreShapeError", "enter_store", "protocol_mismatches"]


class StoreShapeError(TypeError):
    """The object is not shaped like a TaskStore; the message lists every mismatch."""


def _expected_signature(name: str) -> inspect.Signature:
    return inspect.signature(getattr(TaskStore, name))


def _describe(param: inspect.Parameter) -> str:
    kind = "keyword-only" if param.kind is inspect.Parameter.KEYWORD_ONLY else "positional"
    default = "" if param.default is inspect.Parameter.empty else f"={param.default!r}"
    return f"{kind} {param.name!r}{default}"


def _signature_problems(name: str, method: Any) -> list[str]:
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


def _check_store(obj: object, origin: str) -> TaskStore:
    problems = protocol_mismatches(obj)
    if problems:
        raise StoreShapeError(
            f"{origin} gave {type(obj).__module__}.{type(obj).__qualname__}, which is not a "
            "TaskStore: " + "; ".join(problems)
        )
    assert isinstance(obj, TaskStore)
    return obj


def enter_store(
    factory: Callable[[], Any], stack: contextlib.ExitStack, *, origin: str = "the factory"
) -> TaskStore:
    """Call ``factory`` and return an open store; teardown is registered on ``stack``.

    ``stack`` unwinds in reverse: ``store.close()`` first, then the factory's own
    teardown (generator code after ``yield``, or ``__exit__``).
    """
    produced = factory()
    if isinstance(produced, Generator):
        gen: Generator[Any, None, None] = produced
        store_obj = next(gen)

        def finish() -> None:
            with contextlib.suppress(StopIteration):
                next(gen)
                raise RuntimeError(f"{origin} yielded more than once")

        stack.callback(finish)
    elif not protocol_mismatches(produced):
        store_obj = produced
    elif hasattr(produced, "__enter__") and hasattr(produced, "__exit__"):
        store_obj = stack.enter_context(produced)
    else:
        store_obj = produced
    store = _check_store(store_obj, origin)
    stack.callback(store.close)
    return store
