"""pytest plugin: ``pytest --chongming-store=MODULE:ATTR`` runs the kit against a store.

Registered through the ``pytest11`` entry point, so installing the package is
enough. Without a configured store it does nothing visible. With one it:

1. resolves and validates the spec at configure time (one store is opened and
   closed), turning every bad spec into a one-paragraph usage error (exit 4);
2. appends the packaged suite (``chongming_conformance/suite/test_*.py``) to
   pytest's arguments, so it runs from any directory next to the user's tests;
3. marks declared deviations strict-xfail and declared-unsupported clauses'
   tests skipped, and skips cross-process tests when there is no shared store;
4. maps every suite test result to the clauses it declares and prints the
   clause table, writes ``--chongming-report`` and applies ``--chongming-gate``.

See docs/plugin.md for the options and the report schema.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import difflib
import fnmatch
import importlib
import os
import pickle
import platform
import re
import sys
import textwrap
import time
import traceback
from collections.abc import Callable, Generator, Iterable
from dataclasses import asdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.register_assert_rewrite(
    "chongming_conformance.contract",
    "chongming_conformance.properties",
    "chongming_conformance.stateful",
    "chongming_conformance._model",
    "chongming_conformance.stress",
)

# Imported after register_assert_rewrite on purpose: none of these is rewritten,
# and none imports the modules above.
from . import __version__  # noqa: E402
from .capabilities import CapabilityError, declared_capabilities  # noqa: E402
from .clauses import CATALOGUE_VERSION, CLAUSES, Scope, clauses_of  # noqa: E402
from .factory import StoreShapeError, enter_store  # noqa: E402
from .report import (  # noqa: E402
    DEVIATION,
    FAIL,
    NOT_VERIFIED,
    PARTIAL_BANNER,
    ClauseResult,
    TestResult,
    clause_entry,
    dumps,
    evaluate,
    gate_failures,
    mask_all,
    mask_secrets,
    render_markdown,
    render_terminal,
    summary_counts,
)
from .suite import SUITE_DIR, _config, suite_files  # noqa: E402
from .timeouts import DEFAULT_TIMEOUT, StoreCallTimeout, call_with_timeout, mechanism  # noqa: E402

__all__ = ["resolve_spec"]

ENV_STORE = "CHONGMING_STORE"
ENV_SHARED = "CHONGMING_SHARED_STORE"
SHARED_ATTR = "make_shared_store"
_MESSAGE_LIMIT = 6000
_SHAPE_HINT = (
    "A store needs the 14 methods of chongming_conformance.TaskStore with the same parameter "
    "names, defaults and keyword-only markers."
)


# =============================================================================================
# options
# =============================================================================================


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chongming", "chongming-conformance: TaskStore conformance kit")
    group.addoption(
        "--chongming-store",
        metavar="MODULE:ATTR",
        default=None,
        help="Run the conformance suite against this store factory (zero-argument callable, "
        f"generator function or context manager). Also env {ENV_STORE} or ini chongming_store.",
    )
    group.addoption(
        "--chongming-shared-store",
        metavar="MODULE:ATTR",
        default=None,
        help="Factory giving a picklable opener of one shared store location, for the "
        f"cross-process clauses. Also env {ENV_SHARED} or ini chongming_shared_store. "
        f"Default: {SHARED_ATTR} in the store's module, if it exists.",
    )
    group.addoption(
        "--chongming-timeout",
        metavar="SECONDS",
        type=float,
        default=None,
        help=f"Seconds one store call may take before its test fails (default "
        f"{DEFAULT_TIMEOUT:g}; 0 disables). Also ini chongming_timeout.",
    )
    group.addoption(
        "--chongming-report",
        metavar="PATH",
        action="append",
        default=[],
        help="Write the conformance report to PATH (.json or .md); may be repeated.",
    )
    group.addoption(
        "--chongming-gate",
        choices=("must", "should"),
        default=None,
        help="Exit non-zero when a clause at this level or above is FAIL or NOT VERIFIED "
        "(review clauses excluded), or the run is partial.",
    )
    group.addoption(
        "--chongming-profile",
        metavar="NAME",
        default=None,
        help="Hypothesis profile for the property checks (quick, ci, thorough).",
    )
    group.addoption(
        "--chongming-stress",
        metavar="PROFILE",
        choices=("quick", "ci", "thorough"),
        default=None,
        help="Stress-harness profile for the cross-process clauses (quick, ci, thorough; "
        "default ci). Only used when a shared store is configured.",
    )
    group.addoption(
        "--chongming-stress-processes",
        metavar="N",
        type=int,
        default=None,
        help="Override the stress profile's number of racing worker processes (>= 2).",
    )
    group.addoption(
        "--chongming-stress-rounds",
        metavar="N",
        type=int,
        default=None,
        help="Override the stress profile's rounds per scenario (>= 1).",
    )
    group.addoption(
        "--chongming-stress-deadline",
        metavar="SECONDS",
        type=float,
        default=None,
        help="Override the wall-clock bound of one stress scenario; stuck workers are "
        "terminated and the scenario fails.",
    )
    group.addoption(
        "--chongming-suite-only",
        action="store_true",
        default=False,
        help="Collect only the conformance suite, not the tests of the current project.",
    )
    parser.addini("chongming_store", "Store factory MODULE:ATTR (see --chongming-store).")
    parser.addini(
        "chongming_shared_store", "Shared store factory MODULE:ATTR (see --chongming-shared-store)."
    )
    parser.addini("chongming_timeout", "Per-call timeout in seconds (see --chongming-timeout).")


def _setting(config: pytest.Config, option: str, env: str | None, ini: str) -> tuple[str, str]:
    """(value, where it came from): the option wins, then the environment, then the ini."""
    value = config.getoption(option)
    if value:
        return str(value), "--" + option.replace("_", "-")
    if env and os.environ.get(env):
        return os.environ[env], f"environment variable {env}"
    ini_value = config.getini(ini)
    if ini_value:
        return str(ini_value).strip(), f"ini option {ini}"
    return "", ""


# =============================================================================================
# spec resolution: one precise paragraph per mistake
# =============================================================================================


def _tb(exc: BaseException, skip_frames_from: Iterable[str] = ()) -> str:
    """The traceback of ``exc`` without this plugin's and importlib's frames."""
    skip = (
        os.path.dirname(__file__) + os.sep,  # the kit's own frames say nothing to the author
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
        raise pytest.UsageError(
            f"{where}={spec!r}: importing module {modname!r} raised "
            f"{type(exc).__name__}: {exc}\n{_indent(_tb(exc))}"
        ) from None


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
            raise pytest.UsageError(
                f"{where}={spec!r}: calling {label} raised {type(exc).__name__}: {exc}\n"
                f"{_indent(_tb(exc))}"
            ) from None
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
            raise pytest.UsageError(
                f"{where}={spec!r}: opening a store with {label} failed with "
                f"{type(exc).__name__}: {exc}\n{_indent(_tb(exc))}"
            ) from None
        described = f"{type(store).__module__}.{type(store).__qualname__}"
        shown = repr(store)
        try:
            stack.close()
        except BaseException as exc:
            raise pytest.UsageError(
                f"{where}={spec!r}: closing the store from {label} raised "
                f"{type(exc).__name__}: {exc}\n{_indent(_tb(exc))}"
            ) from None
    return described + "\n" + mask_secrets(shown[:500])


def _check_shared(factory: Callable[[], Any], spec: str, where: str, timeout: float) -> None:
    """Set up the shared location once, open one store through the opener, tear down."""
    label = f"{spec}()"
    try:
        with contextlib.ExitStack() as stack:
            opener = call_with_timeout(
                label, timeout, lambda: _config.enter_opener(factory, stack)
            )
            try:
                pickle.dumps(opener)
            except Exception as exc:
                raise pytest.UsageError(
                    f"{where}={spec!r}: the opener {label} gave ({opener!r}) cannot be pickled "
                    f"({type(exc).__name__}: {exc}), so it cannot be shipped to worker "
                    "processes; return e.g. functools.partial(MyStore, path) instead of a "
                    "lambda or closure."
                ) from None
            with contextlib.ExitStack() as inner:
                call_with_timeout(
                    f"opener from {label}",
                    timeout,
                    lambda: enter_store(opener, inner, origin=f"the opener from {label}"),
                )
    except pytest.UsageError:
        raise
    except BaseException as exc:
        raise pytest.UsageError(
            f"{where}={spec!r}: setting up the shared store failed with "
            f"{type(exc).__name__}: {exc}\n{_indent(_tb(exc))}"
        ) from None


# =============================================================================================
# configure
# =============================================================================================


def _timeout(config: pytest.Config) -> float:
    value: Any = config.getoption("chongming_timeout")
    source = "--chongming-timeout"
    if value is None:
        raw = config.getini("chongming_timeout")
        if not raw:
            return DEFAULT_TIMEOUT
        source = "ini option chongming_timeout"
        try:
            value = float(str(raw))
        except ValueError:
            raise pytest.UsageError(f"{source}={raw!r} is not a number of seconds.") from None
    if value < 0:
        raise pytest.UsageError(f"{source}={value!r} must be >= 0 (0 disables the timeout).")
    return float(value)


def _load_profile(name: str | None) -> None:
    if not name:
        return
    try:
        profiles = importlib.import_module("chongming_conformance.profiles")
    except ModuleNotFoundError as exc:
        if exc.name == "chongming_conformance.profiles":
            raise pytest.UsageError(
                f"--chongming-profile={name!r}: this build of chongming-conformance has no "
                "profiles module (chongming_conformance.profiles)."
            ) from None
        raise
    try:
        profiles.load_profile(name)
    except Exception as exc:
        raise pytest.UsageError(
            f"--chongming-profile={name!r}: {type(exc).__name__}: {exc}"
        ) from None


def _stress_profile(config: pytest.Config) -> Any:
    """The StressProfile from --chongming-stress and its overrides (usage error if invalid)."""
    from dataclasses import replace

    from .stress.profile import get_profile

    name = config.getoption("chongming_stress")
    overrides = {
        field: value
        for field, value in (
            ("processes", config.getoption("chongming_stress_processes")),
            ("rounds", config.getoption("chongming_stress_rounds")),
            ("deadline", config.getoption("chongming_stress_deadline")),
        )
        if value is not None
    }
    try:
        profile = get_profile(name)
        return replace(profile, name=f"{profile.name}*", **overrides) if overrides else profile
    except ValueError as exc:
        raise pytest.UsageError(f"--chongming-stress: {exc}.") from None


_BLAME = re.compile(r"^(?:E\s+)?chongming-blame: (.*)$", re.MULTILINE)


def _blames(text: str, declared: Iterable[str]) -> tuple[str, ...]:
    """Clauses a failure's ``chongming-blame:`` note names, among those the test declares.

    Empty (blame everything the test declares) when there is no note or it names
    none of the declared clauses -- the conservative reading.
    """
    named = {c.strip() for m in _BLAME.finditer(text) for c in m.group(1).split(",")}
    return tuple(sorted(named & set(declared)))


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("help", False) or config.getoption("version", 0):
        return
    spec, source = _setting(config, "chongming_store", ENV_STORE, "chongming_store")
    if not spec:
        return
    invocation_dir = config.invocation_params.dir
    timeout = _timeout(config)
    for report_path in config.getoption("chongming_report"):
        if Path(report_path).suffix not in (".json", ".md"):
            raise pytest.UsageError(
                f"--chongming-report={report_path!r} must end in .json or .md (the format "
                "follows the suffix)."
            )
    factory, module, label = resolve_spec(spec, source, invocation_dir)
    try:
        caps = declared_capabilities(factory, module, label)
    except CapabilityError as exc:
        raise pytest.UsageError(f"{source}={spec!r}: {exc}.") from None
    described = _open_check(factory, spec, source, timeout)

    shared_spec, shared_source = _setting(
        config, "chongming_shared_store", ENV_SHARED, "chongming_shared_store"
    )
    shared_factory: Callable[[], Any] | None = None
    if shared_spec:
        if "cross_process" in caps.unsupported:
            raise pytest.UsageError(
                f"{shared_source}={shared_spec!r} is given, but {caps.origin} declares "
                "cross_process unsupported; drop one of the two."
            )
        shared_factory, _, shared_spec = resolve_spec(shared_spec, shared_source, invocation_dir)
    elif "cross_process" not in caps.unsupported and callable(getattr(module, SHARED_ATTR, None)):
        shared_factory = getattr(module, SHARED_ATTR)
        shared_spec = f"{module.__name__}:{SHARED_ATTR}"
        shared_source = f"found {SHARED_ATTR} in {module.__name__}"
    if shared_factory is not None:
        _check_shared(shared_factory, shared_spec, shared_source, timeout)

    profile = config.getoption("chongming_profile")
    _load_profile(profile)
    stress_profile = _stress_profile(config)

    _config.install(
        _config.KitConfig(
            store_spec=label,
            store_factory=factory,
            store_source=source,
            shared_spec=shared_spec or None,
            shared_factory=shared_factory,
            shared_source=shared_source or None,
            timeout=timeout,
            capabilities=caps,
            profile=profile,
            stress_profile=stress_profile,
        )
    )
    run = ConformanceRun(config, described)
    run.add_suite_to_args()
    config.pluginmanager.register(run, "chongming-conformance-run")


def pytest_unconfigure(config: pytest.Config) -> None:
    _config.uninstall()


# =============================================================================================
# one run
# =============================================================================================


def _item_clauses(item: pytest.Item) -> tuple[str, ...]:
    found: list[str] = []
    for obj in (getattr(item, "function", None), getattr(item, "obj", None),
                getattr(item, "cls", None)):
        if obj is not None:
            found.extend(c for c in clauses_of(obj) if c not in found)
    return tuple(found)


_SEED = re.compile(r"@seed\((\d+)\)|--hypothesis-seed=(\S+)")
_REPRO = re.compile(r"@reproduce_failure\([^)]*\)")
_E_PREFIX = re.compile(r"^E(\s|$)")
# Hypothesis' wording changed over releases; both name the minimal failing input.
_EXAMPLE_HEADS = ("Falsifying", "Failing test case")


def _hypothesis_info(texts: Iterable[str]) -> dict[str, list[str]]:
    seeds: list[str] = []
    examples: list[str] = []
    notes: list[str] = []
    for text in texts:
        lines = [" " + line[1:] if _E_PREFIX.match(line) else line for line in text.splitlines()]
        block: list[str] | None = None
        for line in lines:
            if line.lstrip().startswith(_EXAMPLE_HEADS):
                block = [line.rstrip()]
                examples.append("")
                continue
            if block is not None:
                if not line.strip() or line.lstrip().startswith(("Traceback", "You can")):
                    block = None
                else:
                    block.append(line.rstrip())
                    examples[-1] = textwrap.dedent("\n".join(block))
                    continue
            for m in _SEED.finditer(line):
                seed = m.group(1) or m.group(2)
                if seed not in seeds:
                    seeds.append(seed)
            for m in _REPRO.finditer(line):
                if m.group(0) not in notes:
                    notes.append(m.group(0))
        if examples and examples[-1] == "" and block:
            examples[-1] = textwrap.dedent("\n".join(block))
    for i, ex in enumerate(examples):
        if not ex:
            examples[i] = "(failing example not shown)"
    return {
        "seeds": seeds,
        "falsifying_examples": list(dict.fromkeys(examples)),
        "notes": notes,
    }


class ConformanceRun:
    """Hooks active only when a store is configured (registered by pytest_configure)."""

    def __init__(self, config: pytest.Config, described: str) -> None:
        self.config = config
        self.kit = _config.current()
        self.store_type, _, self.store_repr = described.partition("\n")
        self.started = time.time()
        self.partial_reasons: list[str] = []
        self.suite_items: dict[str, tuple[str, ...]] = {}
        self.hypothesis_items: set[str] = set()
        self.deselected: list[str] = []
        self.collection_errors: list[str] = []
        self.reports: dict[str, dict[str, pytest.TestReport]] = {}
        self.results: list[ClauseResult] = []
        self.doc: dict[str, Any] | None = None
        self.gate_failed: list[ClauseResult] = []
        self.reports_written: list[Path] = []
        self.forced_top: Path | None = None

    # -- collection -------------------------------------------------------------------------
    def _arg_path(self, arg: str) -> Path:
        path = Path(arg.split("::", 1)[0])
        if not path.is_absolute():
            path = self.config.invocation_params.dir / path
        return path.resolve()

    def add_suite_to_args(self) -> None:
        """Append the suite files to pytest's args, unless the user already named suite paths."""
        prefix = "chongming_conformance/suite/"
        for i, arg in enumerate(self.config.args):
            # Node ids as the report prints them (see pytest_pycollect_makemodule) re-run.
            if arg.startswith(prefix) and not self._arg_path(arg).exists():
                self.config.args[i] = str(SUITE_DIR / arg[len(prefix):])
        args = list(self.config.args)
        explicit = self.config.args_source is pytest.Config.ArgsSource.ARGS
        in_suite = [a for a in args if _under(self._arg_path(a), SUITE_DIR)]
        covers = [a for a in args if "::" not in a and _under(SUITE_DIR, self._arg_path(a))]
        if in_suite and explicit:
            whole = [a for a in in_suite if "::" not in a and self._arg_path(a) == SUITE_DIR]
            if not whole:
                named = {self._arg_path(a) for a in in_suite if "::" not in a}
                if any("::" in a for a in in_suite) or set(suite_files()) - named:
                    self.partial_reasons.append(
                        "suite narrowed to explicit paths or node ids: " + ", ".join(in_suite)
                    )
            if self.config.getoption("chongming_suite_only"):
                self.config.args[:] = in_suite
            return
        files = [str(p) for p in suite_files()]
        if self.config.getoption("chongming_suite_only") or not args:
            self.config.args[:] = files
        elif not covers:
            self.config.args.extend(files)
        else:
            # An argument (typically the project root) contains the suite: pytest would
            # drop our file arguments as overlapping it, and then not recurse into the
            # suite if it sits in an ignored directory (a `.venv` in the project root).
            top = self._arg_path(covers[0])
            chain = [d for d in reversed(SUITE_DIR.parents) if top in d.parents]
            self.forced_top = next((d for d in [*chain, SUITE_DIR] if self._ignored(d)), None)

    def _ignored(self, directory: Path) -> bool:
        """Whether pytest's recursion skips ``directory`` (virtualenv or norecursedirs)."""
        if not self.config.getoption("collect_in_virtualenv") and (
            (directory / "pyvenv.cfg").is_file()
            or (directory / "conda-meta" / "history").is_file()
        ):
            return True
        patterns = self.config.getini("norecursedirs")
        return any(fnmatch.fnmatch(directory.name, str(pat)) for pat in patterns)

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool | None:
        """Inside an otherwise ignored directory, collect the suite and nothing else."""
        top = self.forced_top
        if top is None or not _under(collection_path, top):
            return None
        if collection_path == SUITE_DIR or collection_path in SUITE_DIR.parents:
            return False  # on the way down to the suite
        if _under(collection_path, SUITE_DIR):
            return None  # the suite's own files: pytest's usual rules
        return True

    def _is_suite(self, item: pytest.Item) -> bool:
        return _under(Path(str(item.path)).resolve(), SUITE_DIR)

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makemodule(
        self, module_path: Path, parent: pytest.Collector
    ) -> pytest.Module | None:
        """Give suite modules outside the rootdir a readable node id.

        pytest names a file given as an argument outside the rootdir by nothing at
        all (``::TestStoreContract::test_x``); call it
        ``chongming_conformance/suite/test_x.py`` instead.
        """
        if not _under(module_path.resolve(), SUITE_DIR):
            return None
        try:
            module_path.resolve().relative_to(self.config.rootpath.resolve())
        except ValueError:
            name = "chongming_conformance/suite/" + module_path.name
            module: pytest.Module = pytest.Module.from_parent(
                parent, path=module_path, nodeid=name
            )
            return module
        return None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        caps = self.kit.capabilities
        unsupported = caps.unsupported_clauses()
        for item in items:
            if not self._is_suite(item):
                continue
            cids = _item_clauses(item)
            self.suite_items[item.nodeid] = cids
            if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
                self.hypothesis_items.add(item.nodeid)
            excused = [c for c in cids if c in unsupported]
            needs_shared = [c for c in cids if CLAUSES[c].scope is Scope.CROSS_PROCESS]
            deviating = [c for c in cids if c in caps.deviations]
            if excused:
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"UNSUPPORTED by declaration: {unsupported[excused[0]]}"
                    )
                )
            elif needs_shared and self.kit.shared_factory is None:
                item.add_marker(
                    pytest.mark.skip(
                        reason="NOT VERIFIED: needs a shared store (--chongming-shared-store "
                        f"or {SHARED_ATTR} in the store's module)"
                    )
                )
            elif deviating:
                reasons = "; ".join(f"{c}: {caps.deviations[c]}" for c in deviating)
                item.add_marker(
                    pytest.mark.xfail(strict=True, reason=f"declared deviation ({reasons})")
                )

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        for item in items:
            if self._is_suite(item):
                self.deselected.append(item.nodeid)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and _under(Path(str(report.fspath)).resolve(), SUITE_DIR):
            self.collection_errors.append(
                mask_secrets(f"{report.nodeid}: {report.longreprtext}"[:_MESSAGE_LIMIT])
            )

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        kept = {item.nodeid for item in session.items}
        # Items deselected after our modifyitems ran are gone from session.items.
        self.suite_items = {n: c for n, c in self.suite_items.items() if n in kept}

    # -- header and reports -------------------------------------------------------------------
    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        kit = self.kit
        shared = f"{kit.shared_spec} ({kit.shared_source})" if kit.shared_spec else "none"
        if kit.shared_spec and kit.stress_profile is not None:
            p = kit.stress_profile
            shared += (
                f", stress profile {p.name}: {p.processes} processes, {p.rounds} rounds, "
                f"{p.deadline:g} s bound"
            )
        lines = [
            f"chongming-conformance {__version__} (catalogue {CATALOGUE_VERSION}): store "
            f"{kit.store_spec} from {kit.store_source} -> {self.store_type}",
            f"chongming: shared store {shared}; timeout {kit.timeout:g} s per call "
            f"({mechanism()})",
        ]
        if kit.capabilities.unsupported or kit.capabilities.deviations:
            lines.append(
                f"chongming: declared in {kit.capabilities.origin}: unsupported "
                f"{dict(kit.capabilities.unsupported)}, deviations "
                f"{sorted(kit.capabilities.deviations)}"
            )
        return [mask_secrets(line) for line in lines]

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if self._is_suite(item):
            if report.failed:
                text = report.longreprtext
                masked = mask_secrets(text)
                if masked != text:
                    report.longrepr = masked
            report.sections = [(t, mask_secrets(c)) for t, c in report.sections]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid in self.suite_items:
            self.reports.setdefault(report.nodeid, {})[report.when] = report

    # -- results --------------------------------------------------------------------------------
    def _test_result(self, nodeid: str) -> TestResult:
        phases = self.reports.get(nodeid, {})
        result = TestResult(nodeid)
        if not phases:
            return result
        result.duration_s = sum(r.duration for r in phases.values())
        call = phases.get("call")
        xfailed = [r for r in phases.values() if r.skipped and hasattr(r, "wasxfail")]
        failed = [r for r in phases.values() if r.failed]
        skipped = [r for r in phases.values() if r.skipped and not hasattr(r, "wasxfail")]
        if failed:
            first = failed[0]
            text = first.longreprtext
            if first.when == "call" and text.startswith("[XPASS(strict)]"):
                result.outcome = "xpassed"
                result.message = text
            else:
                result.outcome = "failed"
                where = "" if first.when == "call" else f"[{first.when}] "
                result.message = where + text[-_MESSAGE_LIMIT:]
                result.blames = _blames(text, self.suite_items.get(nodeid, ()))
        elif xfailed:
            result.outcome = "xfailed"
            result.message = f"expected failure: {xfailed[0].wasxfail}\n" + (
                xfailed[0].longreprtext[-_MESSAGE_LIMIT:]
            )
        elif skipped:
            result.outcome = "skipped"
            longrepr = skipped[0].longrepr
            result.message = (
                str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
            )
        elif call is not None and call.passed:
            result.outcome = "passed"
        # Property checks may run hypothesis inside a plain test method, so look at every
        # failing test's output, not only at @given tests.
        texts = [r.longreprtext for r in phases.values() if r.longrepr and not r.passed]
        texts += [c for r in phases.values() for _, c in r.sections]
        info = _hypothesis_info(texts)
        if nodeid in self.hypothesis_items or any(info.values()):
            result.hypothesis = info
        if result.message is not None:
            result.message = mask_secrets(result.message)
        return result

    def _partial_reasons(self, tests: dict[str, TestResult]) -> list[str]:
        reasons = list(self.partial_reasons)
        if self.deselected:
            opts = [
                name
                for name, value in (
                    ("-k", self.config.getoption("keyword", "")),
                    ("-m", self.config.getoption("markexpr", "")),
                    ("--deselect", self.config.getoption("deselect", None)),
                    ("--lf", self.config.getoption("lf", False)),
                    ("--sw", self.config.getoption("stepwise", False)),
                )
                if value
            ]
            how = "/".join(opts) if opts else "a plugin"
            reasons.append(f"{len(self.deselected)} suite test(s) deselected by {how}")
        not_run = [n for n, t in tests.items() if t.outcome == "not run"]
        if not_run:
            reasons.append(
                f"{len(not_run)} suite test(s) did not run (stopped early: -x/--maxfail or an "
                "interruption)"
            )
        if not self.suite_items and not self.collection_errors:
            reasons.append("no suite test was collected")
        return reasons

    def build(self, session: pytest.Session) -> dict[str, Any]:
        tests = {nodeid: self._test_result(nodeid) for nodeid in self.suite_items}
        by_clause: dict[str, list[TestResult]] = {}
        unmapped: list[TestResult] = []
        for nodeid, cids in self.suite_items.items():
            if not cids:
                unmapped.append(tests[nodeid])
            for cid in cids:
                by_clause.setdefault(cid, []).append(tests[nodeid])
        self.results = evaluate(
            by_clause, self.kit.capabilities, shared_available=self.kit.shared_factory is not None
        )
        reasons = self._partial_reasons(tests)
        gate = self.config.getoption("chongming_gate")
        self.gate_failed = gate_failures(self.results, gate) if gate else []
        gate_passed = None if gate is None else not self.gate_failed and not reasons
        if gate and not gate_passed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        try:
            import hypothesis

            hyp_version: str | None = hypothesis.__version__
        except ImportError:  # pragma: no cover - hypothesis is a dependency
            hyp_version = None
        seed = self.config.getoption("hypothesis_seed", None)
        kit = self.kit
        doc: dict[str, Any] = {
            "schema": "chongming-conformance-report",
            "schema_version": 1,
            "kit_version": __version__,
            "catalogue_version": CATALOGUE_VERSION,
            "store": {
                "spec": kit.store_spec,
                "source": kit.store_source,
                "type": self.store_type or None,
                "repr": self.store_repr or None,
                "shared_spec": kit.shared_spec,
                "shared_source": kit.shared_source,
            },
            "environment": {
                "python": platform.python_version(),
                "implementation": platform.python_implementation(),
                "platform": platform.platform(),
                "pytest": pytest.__version__,
                "hypothesis": hyp_version,
            },
            "run": {
                "started_at": _dt.datetime.fromtimestamp(self.started, _dt.UTC).isoformat(),
                "duration_s": round(time.time() - self.started, 3),
                "partial": bool(reasons),
                "partial_reasons": reasons,
                "timeout_s": kit.timeout,
                "timeout_mechanism": mechanism(),
                "profile": kit.profile,
                "stress_profile": (
                    None if kit.stress_profile is None or kit.shared_factory is None
                    else asdict(kit.stress_profile)
                ),
                "hypothesis_seed": None if seed is None else str(seed),
                "gate": gate,
                "gate_passed": gate_passed,
                "pytest_exit_status": int(session.exitstatus),
                "tests_collected": len(self.suite_items),
                "collection_errors": self.collection_errors,
            },
            "capabilities": kit.capabilities.to_json(),
            "verdict": self._verdict(reasons),
            "summary": summary_counts(self.results),
            "clauses": [clause_entry(r) for r in self.results],
            "unmapped_tests": [t.to_json() for t in unmapped],
        }
        masked: dict[str, Any] = mask_all(doc)
        return masked

    def _verdict(self, reasons: list[str]) -> str:
        if reasons:
            return PARTIAL_BANNER
        must = [r for r in self.results if r.gated and r.clause.level.value == "MUST"]
        failed = [r for r in must if r.outcome == FAIL]
        unverified = [r for r in must if r.outcome == NOT_VERIFIED]
        deviating = [r for r in self.results if r.outcome == DEVIATION]
        if failed:
            return f"does not conform: {len(failed)} MUST clause(s) FAIL"
        if unverified:
            return (
                f"not proven: {len(unverified)} MUST clause(s) NOT VERIFIED, none FAIL"
            )
        if deviating:
            return f"conforms except {len(deviating)} declared deviation(s)"
        return "conforms: every gated MUST clause PASS or UNSUPPORTED by declaration"

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.config.getoption("collectonly"):
            return
        self.doc = self.build(session)
        for path in self.config.getoption("chongming_report"):
            target = Path(path)
            if not target.is_absolute():
                target = self.config.invocation_params.dir / target
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.suffix == ".json":
                target.write_text(dumps(self.doc), encoding="utf-8")
            else:
                target.write_text(render_markdown(self.doc), encoding="utf-8")
            self.reports_written.append(target)

    def pytest_terminal_summary(
        self, terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
    ) -> None:
        if self.doc is None:
            return
        tr = terminalreporter
        tr.write_sep("=", f"chongming conformance: {mask_secrets(self.kit.store_spec)}")
        for line, colour in render_terminal(self.doc):
            tr.write_line(line, **({colour: True} if colour else {}))
        gate = self.config.getoption("chongming_gate")
        if gate:
            if self.doc["run"]["gate_passed"]:
                tr.write_line(f"chongming gate ({gate}): passed", green=True)
            else:
                ids = [r.clause.id for r in self.gate_failed]
                why = ", ".join(ids[:6]) + (f" and {len(ids) - 6} more" if len(ids) > 6 else "")
                if self.doc["run"]["partial"]:
                    why = f"partial run; {why}" if ids else "partial run"
                tr.write_line(f"chongming gate ({gate}): FAILED ({why})", red=True, bold=True)
        for target in self.reports_written:
            tr.write_line(f"chongming report written to {target}")
