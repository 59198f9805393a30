"""Resolving ``MODULE:ATTR`` specs into a checked kit configuration: one paragraph per mistake.

At configure time the store spec is imported, its capability declaration read,
one store opened and closed, and the shared-store factory (given, or found as
``make_shared_store`` next to the store factory) set up once and its opener
tried. Every way this can go wrong becomes a :class:`pytest.UsageError` (exit
4) that names the setting, the spec and the fix -- never a traceback from inside
the kit.
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

import pytest

from ..capabilities import Capabilities, CapabilityError, declared_capabilities
from ..factory import StoreShapeError, enter_opener, enter_store, picklability_problem
from ..report import mask_secrets
from ..suite._config import KitConfig
from ..timeouts import StoreCallTimeout, call_with_timeout
from .options import SHARED_ATTR, Options

__all__ = ["resolve_kit", "resolve_spec"]

_KIT_DIR = str(Path(__file__).resolve().parent.parent) + os.sep
_SHAPE_HINT = (
    "A store needs the 14 methods of chongming_conformance.TaskStore with the same parameter "
    "names, defaults and keyword-only markers."
)


def _tb(exc: BaseException, skip_frames_from: Iterable[str] = ()) -> str:
    """The traceback of ``exc`` without this plugin's and importlib's frames."""
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


def _raised(where: str, spec: str, doing: str, exc: BaseException) -> pytest.UsageError:
    """The usage error for an exception the author's code raised: what, then their traceback."""
    return pytest.UsageError(
        f"{where}={spec!r}: {doing} {type(exc).__name__}: {exc}\n{_indent(_tb(exc))}"
    )


def _import(modname: str, spec: str, where: str, invocation_dir: Path) -> ModuleType:
    try:
        return importlib.import_module(modname)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        top = modname.split(".")[0]
        here = str(invocation_dir)
        if missing in (top, modname) and here not in sys.path:
            # `pytest` (unlike `python -m pytest`) does not put the current directory on
            # sys.path; a store module in the project root is the common case.
            sys.path.append(here)
            with contextlib.suppress(ModuleNotFoundError):
                return importlib.import_module(modname)
        raise pytest.UsageError(
            f"{where}={spec!r}: cannot import module {modname!r}: "
            f"{type(exc).__name__}: {exc}. Check the spelling, that the package is installed "
            f"in this environment ({sys.executable}), or that its directory is on sys.path "
            "(pytest's `pythonpath` ini option)."
        ) from None
    except BaseException as exc:
        raise _raised(where, spec, f"importing module {modname!r} raised", exc) from None


def resolve_spec(
    spec: str, where: str, invocation_dir: Path
) -> tuple[Callable[[], Any], ModuleType, str]:
    """``MODULE:ATTR`` -> (callable, module, label) or a :class:`pytest.UsageError`.

    ``ATTR`` may be dotted (``mod:Class.create``).
    """
    if ":" not in spec:
        raise pytest.UsageError(
            f"{where}={spec!r} is not of the form MODULE:ATTR: it needs a colon between the "
            "module to import and the factory in it, e.g. "
            f"--chongming-store={spec or 'mypkg.stores'}:make_store."
        )
    modname, _, attr = spec.partition(":")
    if not modname or not attr or ":" in attr:
        raise pytest.UsageError(
            f"{where}={spec!r} is not of the form MODULE:ATTR (exactly one colon, a module "
            "before it and an attribute after it), e.g. --chongming-store=mypkg.stores:make_store."
        )
    module = _import(modname, spec, where, invocation_dir)
    obj: Any = module
    walked = modname
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(obj) if not n.startswith("__")]
            close = difflib.get_close_matches(part, names, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            factories = [n for n in names if "store" in n.lower() and callable(getattr(obj, n))]
            listing = (
                f" Callables mentioning 'store' there: {', '.join(factories)}."
                if factories and not close
                else ""
            )
            origin = getattr(module, "__file__", None) or modname
            raise pytest.UsageError(
                f"{where}={spec!r}: {walked!r} ({origin}) has no attribute {part!r}{hint}"
                f"{listing}"
            )
        obj = getattr(obj, part)
        walked = f"{walked}.{part}"
    if not callable(obj):
        raise pytest.UsageError(
            f"{where}={spec!r}: {attr!r} is a {type(obj).__name__}, not callable. The spec must "
            "name a zero-argument callable that returns a store, a generator function that "
            "yields one, or a callable returning a context manager of one (a class works too)."
        )
    return obj, module, f"{modname}:{attr}"


def _open_check(factory: Callable[[], Any], spec: str, where: str, timeout: float) -> str:
    """Open and close one store; return its masked description, or raise UsageError."""
    label = f"{spec}()"
    with contextlib.ExitStack() as stack:
        try:
            produced = call_with_timeout(label, timeout, factory)
        except StoreCallTimeout as exc:
            raise pytest.UsageError(f"{where}={spec!r}: {exc}") from None
        except BaseException as exc:
            raise _raised(where, spec, f"calling {label} raised", exc) from None
        try:
            store = call_with_timeout(
                label, timeout, lambda: enter_store(lambda: produced, stack, origin=label)
            )
        except StoreCallTimeout as exc:
            raise pytest.UsageError(f"{where}={spec!r}: {exc}") from None
        except StoreShapeError as exc:
            # Any form: what the factory gave (returned, yielded, entered) is not a store.
            raise pytest.UsageError(f"{where}={spec!r}: {exc}. {_SHAPE_HINT}") from None
        except BaseException as exc:
            raise _raised(where, spec, f"opening a store with {label} failed with", exc) from None
        described = f"{type(store).__module__}.{type(store).__qualname__}"
        shown = repr(store)
        try:
            stack.close()
        except BaseException as exc:
            raise _raised(where, spec, f"closing the store from {label} raised", exc) from None
    return described + "\n" + mask_secrets(shown[:500])


def _check_shared(factory: Callable[[], Any], spec: str, where: str, timeout: float) -> None:
    """Set up the shared location once, open one store through the opener, tear down."""
    label = f"{spec}()"
    try:
        with contextlib.ExitStack() as stack:
            opener = call_with_timeout(
                label, timeout, lambda: enter_opener(factory, stack, origin=label)
            )
            problem = picklability_problem(opener)
            if problem is not None:
                raise pytest.UsageError(f"{where}={spec!r}: {problem}.")
            with contextlib.ExitStack() as inner:
                call_with_timeout(
                    f"opener from {label}",
                    timeout,
                    lambda: enter_store(opener, inner, origin=f"the opener from {label}"),
                )
    except pytest.UsageError:
        raise
    except StoreShapeError as exc:
        raise pytest.UsageError(f"{where}={spec!r}: {exc}.") from None
    except BaseException as exc:
        raise _raised(where, spec, "setting up the shared store failed with", exc) from None


def _shared_factory(
    options: Options, module: ModuleType, caps: Capabilities
) -> tuple[Callable[[], Any] | None, str | None, str | None]:
    """(factory, spec, source) of the shared store: given, found next to the store, or none."""
    if options.shared_spec:
        if "cross_process" in caps.unsupported:
            raise pytest.UsageError(
                f"{options.shared_source}={options.shared_spec!r} is given, but {caps.origin} "
                "declares cross_process unsupported; drop one of the two."
            )
        factory, _, spec = resolve_spec(
            options.shared_spec, options.shared_source, options.invocation_dir
        )
        return factory, spec, options.shared_source
    if "cross_process" not in caps.unsupported and callable(getattr(module, SHARED_ATTR, None)):
        return (
            getattr(module, SHARED_ATTR),
            f"{module.__name__}:{SHARED_ATTR}",
            f"found {SHARED_ATTR} in {module.__name__}",
        )
    return None, None, None


def resolve_kit(options: Options) -> tuple[KitConfig, str]:
    """The checked :class:`KitConfig` and the opened store's masked ``type\\nrepr``."""
    spec, source = options.store_spec, options.store_source
    factory, module, label = resolve_spec(spec, source, options.invocation_dir)
    try:
        caps = declared_capabilities(factory, module, label)
    except CapabilityError as exc:
        raise pytest.UsageError(f"{source}={spec!r}: {exc}.") from None
    described = _open_check(factory, spec, source, options.timeout)
    shared_factory, shared_spec, shared_source = _shared_factory(options, module, caps)
    if shared_factory is not None:
        assert shared_spec is not None and shared_source is not None
        _check_shared(shared_factory, shared_spec, shared_source, options.timeout)
    kit = KitConfig(
        store_spec=label,
        store_factory=factory,
        store_source=source,
        shared_spec=shared_spec,
        shared_factory=shared_factory,
        shared_source=shared_source,
        timeout=options.timeout,
        capabilities=caps,
        profile=options.profile,
        stress_profile=options.stress_profile,
    )
    return kit, described
