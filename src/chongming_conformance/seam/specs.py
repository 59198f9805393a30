"""``MODULE:ATTR`` -> the callable it names, or one precise, masked :class:`SpecError`.

The pytest plugin, ``chongming-conformance check`` and ``chongming-conformance
bench`` all take store specs; they resolve them here so the three give the same
message for the same mistake and the same exit status (:data:`USAGE_ERROR_EXIT`,
pytest's ``ExitCode.USAGE_ERROR``). Nothing here imports pytest.

Every message is masked (a store module that raises at import often has its
DSN in the error), and the import runs under the per-call timeout, because a
module that connects to a dead server at import time would otherwise hang the
run before any test starts.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from ..report.masking import mask_secrets
from .factory import StoreShapeError, enter_opener, enter_store, picklability_problem
from .reuse import check_reset as _reset_leftovers
from .timeouts import DEFAULT_TIMEOUT, StoreCallTimeout, call_with_timeout

__all__ = [
    "USAGE_ERROR_EXIT",
    "SpecError",
    "check_reset",
    "check_shared",
    "open_check",
    "raised",
    "resolve_spec",
]

#: The exit status of every usage error, from the plugin and the CLI alike (pytest's value).
USAGE_ERROR_EXIT = 4

_KIT_DIR = str(Path(__file__).resolve().parent) + os.sep
_SHAPE_HINT = (
    "A store needs the 14 methods of chongming_conformance.TaskStore with the same parameter "
    "names, defaults and keyword-only markers (clause PROTOCOL-METHODS: the store is refused "
    "before any test, so no clause of it is checked)."
)
#: Never turned into a usage error: Ctrl-C stops the run (the author's sys.exit() does not).
_PASS_THROUGH = (KeyboardInterrupt,)


class SpecError(Exception):
    """A setting or spec the kit cannot use; the message is masked and says what to fix."""

    def __init__(self, message: str) -> None:
        super().__init__(mask_secrets(message))


def _tb(exc: BaseException, skip_frames_from: Iterable[str] = ()) -> str:
    """The traceback of ``exc`` without the kit's and importlib's frames."""
    skip = (
        _KIT_DIR,  # the kit's own frames say nothing to the author
        os.path.dirname(importlib.__file__) + os.sep,
        "<frozen importlib",
        *skip_frames_from,
    )
    te = traceback.TracebackException.from_exception(exc)
    te.stack = traceback.StackSummary.from_list(
        [f for f in te.stack if not f.filename.startswith(skip)]
    )
    return "".join(te.format()).rstrip()


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def raised(where: str, spec: str, doing: str, exc: BaseException) -> SpecError:
    """The error for an exception the author's code raised: what, then their traceback."""
    detail = str(exc) or "(no message)"
    return SpecError(f"{where}={spec!r}: {doing} {type(exc).__name__}: {detail}\n"
                     f"{_indent(_tb(exc))}")


def _import(modname: str, spec: str, where: str, invocation_dir: Path,
            timeout: float) -> ModuleType:
    label = f"import {modname}"

    def load() -> ModuleType:
        return call_with_timeout(label, timeout, lambda: importlib.import_module(modname))

    try:
        return load()
    except StoreCallTimeout as exc:
        raise SpecError(f"{where}={spec!r}: {exc}") from None
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        top = modname.split(".")[0]
        here = str(invocation_dir)
        if missing in (top, modname) and here not in sys.path:
            # `pytest` (unlike `python -m pytest`) does not put the current directory on
            # sys.path; a store module in the project root is the common case.
            sys.path.append(here)
            try:
                return load()
            except ModuleNotFoundError:
                pass
            except StoreCallTimeout as again:
                raise SpecError(f"{where}={spec!r}: {again}") from None
            except _PASS_THROUGH:
                raise
            except BaseException as again:
                raise raised(where, spec, f"importing module {modname!r} raised", again) from None
        raise SpecError(
            f"{where}={spec!r}: cannot import module {modname!r}: "
            f"{type(exc).__name__}: {exc}. Check the spelling, that the package is installed "
            f"in this environment ({sys.executable}), or that its directory is on sys.path "
            "(pytest's `pythonpath` ini option)."
        ) from None
    except _PASS_THROUGH:
        raise
    except BaseException as exc:
        raise raised(where, spec, f"importing module {modname!r} raised", exc) from None


def resolve_spec(
    spec: str, where: str, invocation_dir: Path, timeout: float = DEFAULT_TIMEOUT
) -> tuple[Callable[[], Any], ModuleType, str]:
    """``MODULE:ATTR`` -> (callable, module, label), or a :class:`SpecError`.

    ``ATTR`` may be dotted (``mod:Class.create``). ``where`` names the setting the
    spec came from (``--chongming-store``, an environment variable, ...), so the
    message points at what to edit.
    """
    if ":" not in spec:
        raise SpecError(
            f"{where}={spec!r} is not of the form MODULE:ATTR: it needs a colon between the "
            "module to import and the factory in it, e.g. "
            f"--chongming-store={spec or 'mypkg.stores'}:make_store."
        )
    modname, _, attr = spec.partition(":")
    if not modname or not attr or ":" in attr:
        raise SpecError(
            f"{where}={spec!r} is not of the form MODULE:ATTR (exactly one colon, a module "
            "before it and an attribute after it), e.g. --chongming-store=mypkg.stores:make_store."
        )
    module = _import(modname, spec, where, invocation_dir, timeout)
    obj: Any = module
    walked = modname
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(obj) if not n.startswith("__")]
            close = difflib.get_close_matches(part, names, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            factories = []
            for n in names:
                with contextlib.suppress(Exception):
                    if "store" in n.lower() and callable(getattr(obj, n)):
                        factories.append(n)
            listing = (
                f" Callables mentioning 'store' there: {', '.join(factories)}."
                if factories and not close
                else ""
            )
            origin = getattr(module, "__file__", None) or modname
            raise SpecError(
                f"{where}={spec!r}: {walked!r} ({origin}) has no attribute {part!r}{hint}"
                f"{listing}"
            )
        obj = getattr(obj, part)
        walked = f"{walked}.{part}"
    if not callable(obj):
        raise SpecError(
            f"{where}={spec!r}: {attr!r} is a {type(obj).__name__}, not callable. The spec must "
            "name a zero-argument callable that returns a store, a generator function that "
            "yields one, or a callable returning a context manager of one (a class works too)."
        )
    return obj, module, f"{modname}:{attr}"


def open_check(factory: Callable[[], Any], spec: str, where: str, timeout: float) -> str:
    """Open and close one store; return its masked ``type\nrepr``, or raise SpecError."""
    label = f"{spec}()"
    with contextlib.ExitStack() as stack:
        try:
            produced = call_with_timeout(label, timeout, factory)
        except StoreCallTimeout as exc:
            raise SpecError(f"{where}={spec!r}: {exc}") from None
        except _PASS_THROUGH:
            raise
        except BaseException as exc:
            raise raised(where, spec, f"calling {label} raised", exc) from None
        try:
            store = call_with_timeout(
                label, timeout, lambda: enter_store(lambda: produced, stack, origin=label)
            )
        except StoreCallTimeout as exc:
            raise SpecError(f"{where}={spec!r}: {exc}") from None
        except StoreShapeError as exc:
            # Any form: what the factory gave (returned, yielded, entered) is not a store.
            raise SpecError(f"{where}={spec!r}: {exc}. {_SHAPE_HINT}") from None
        except _PASS_THROUGH:
            raise
        except BaseException as exc:
            raise raised(where, spec, f"opening a store with {label} failed with", exc) from None
        described = f"{type(store).__module__}.{type(store).__qualname__}"
        shown = repr(store)
        try:
            stack.close()
        except _PASS_THROUGH:
            raise
        except BaseException as exc:
            raise raised(where, spec, f"closing the store from {label} raised", exc) from None
    return described + "\n" + mask_secrets(shown[:500])


def check_shared(factory: Callable[[], Any], spec: str, where: str, timeout: float) -> None:
    """Set up the shared location once, open one store through the opener, tear down."""
    label = f"{spec}()"
    try:
        with contextlib.ExitStack() as stack:
            opener = call_with_timeout(
                label, timeout, lambda: enter_opener(factory, stack, origin=label)
            )
            problem = picklability_problem(opener)
            if problem is not None:
                raise SpecError(f"{where}={spec!r}: {problem}.")
            with contextlib.ExitStack() as inner:
                call_with_timeout(
                    f"opener from {label}",
                    timeout,
                    lambda: enter_store(opener, inner, origin=f"the opener from {label}"),
                )
    except (SpecError, *_PASS_THROUGH):
        raise
    except StoreShapeError as exc:
        raise SpecError(f"{where}={spec!r}: {exc}.") from None
    except BaseException as exc:
        raise raised(where, spec, "setting up the shared store failed with", exc) from None


def check_reset(
    factory: Callable[[], Any], reset: Callable[[Any], None], spec: str, where: str,
    timeout: float,
) -> None:
    """Prove the reuse seam once before any test: a populated store, reset, reads empty.

    A ``reset_store`` that leaves rows behind would let one test's data leak into the
    next test's verdict; it is a usage error (exit 4) naming what was left.
    """
    label = f"{spec}(store)"
    try:
        with contextlib.ExitStack() as stack:
            store = call_with_timeout(
                f"{spec}: make_store()", timeout,
                lambda: enter_store(factory, stack, origin=f"{spec}: make_store()"),
            )
            left = call_with_timeout(label, timeout, lambda: _reset_leftovers(store, reset))
    except (SpecError, *_PASS_THROUGH):
        raise
    except StoreCallTimeout as exc:
        raise SpecError(f"{where}={spec!r}: {exc}") from None
    except BaseException as exc:
        raise raised(where, spec, f"proving {label} on a populated store raised", exc) from None
    if left:
        raise SpecError(
            f"{where}={spec!r}: after one task, one history row and one command were written, "
            f"{label} left: " + "; ".join(left) + ". The kit keeps one store per process and "
            "empties it with reset_store between tests; a reset that leaves data behind would "
            "let one check's rows reach the next check's verdict. Fix it, or remove "
            "reset_store (or pass --chongming-no-reuse) to open a new store per test."
        )
