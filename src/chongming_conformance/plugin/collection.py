"""Collection steering: put the packaged suite in the run, and mark what declarations excuse.

The suite's files are appended to pytest's arguments (unless the user named
suite paths), collected even from an ignored directory such as a project's
``.venv``, and given readable node ids. Each collected suite test is recorded
with the clauses it declares; tests of clauses the store declared unsupported
are skipped, cross-process tests without a shared store skipped, declared
deviations made strict xfails. What was cut from the suite (explicit paths,
deselection, collection errors) is recorded for the report's partial reasons.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from ..oracle.messages import elide
from ..protocol.clauses import CLAUSES, Scope, clauses_of, may_blame_of
from ..report import mask_secrets
from ..suite import SUITE_DIR, suite_files
from ..suite._config import KitConfig
from .itemdata import clause_properties, serial_nodeid
from .options import SHARED_ATTR, Options

__all__ = ["MESSAGE_LIMIT", "SuiteCollection", "is_suite_item", "under"]

#: Characters of a failure text kept in a report.
MESSAGE_LIMIT = 6000
#: Why the cross-process checks did not run under --chongming-scope=single (a partial reason).
SINGLE_SCOPE = ("--chongming-scope=single: only the single-process clauses ran; no worker "
                "process was spawned, every cross-process clause (XP-*) is NOT VERIFIED")


def under(path: Path, parent: Path) -> bool:
    """Whether ``path`` is ``parent`` or inside it."""
    return path == parent or parent in path.parents


def is_suite_item(item: pytest.Item) -> bool:
    return under(Path(str(item.path)).resolve(), SUITE_DIR)


def _item_clauses(item: pytest.Item) -> tuple[str, ...]:
    found: list[str] = []
    for obj in (getattr(item, "function", None), getattr(item, "obj", None),
                getattr(item, "cls", None)):
        if obj is not None:
            found.extend(c for c in clauses_of(obj) if c not in found)
    return tuple(found)


def _item_may_blame(item: pytest.Item) -> tuple[str, ...]:
    """The clauses a suite test may blame without declaring them (``clauses.may_blame``)."""
    found: list[str] = []
    for obj in (getattr(item, "function", None), getattr(item, "obj", None)):
        if obj is not None:
            found.extend(c for c in may_blame_of(obj) if c not in found)
    return tuple(found)


class SuiteCollection:
    """Hooks that steer collection towards the suite and record what was collected."""

    def __init__(self, config: pytest.Config, options: Options, kit: KitConfig) -> None:
        self.config = config
        self.options = options
        self.kit = kit
        #: Suite node id -> the clauses it declares, in collection order.
        self.declared: dict[str, tuple[str, ...]] = {}
        #: Suite node id -> the clauses it may blame without declaring them (if any).
        self.may_blame: dict[str, tuple[str, ...]] = {}
        self.hypothesis_items: set[str] = set()
        self.deselected: list[str] = []
        self.collection_errors: list[str] = []
        #: Reasons the suite was narrowed by the command line (partial-run reasons).
        self.narrowed: list[str] = []
        if options.scope == "single":
            self.narrowed.append(SINGLE_SCOPE)
        self.forced_top: Path | None = None

    @staticmethod
    def clauses_of_item(item: pytest.Item) -> tuple[str, ...]:
        """The clauses a suite test declares (``()`` for any other test)."""
        return _item_clauses(item) if is_suite_item(item) else ()

    def _marker(self, cids: tuple[str, ...]) -> pytest.MarkDecorator | None:
        """Skip what a declaration excuses or no shared store allows; xfail declared deviations."""
        caps = self.kit.capabilities
        unsupported = caps.unsupported_clauses()
        excused = [c for c in cids if c in unsupported]
        # Skipped when the declaration excuses everything the test checks; a test that
        # also checks a clause the store does support (the fault run's safety, under
        # pauses, for a store with no network) runs, and the excused ones stay UNSUPPORTED.
        if excused and len(excused) == len(cids):
            return pytest.mark.skip(reason=f"UNSUPPORTED by declaration: {unsupported[excused[0]]}")
        needs_shared = [c for c in cids if CLAUSES[c].scope is Scope.CROSS_PROCESS]
        if needs_shared and self.options.scope == "single":
            return pytest.mark.skip(reason=f"NOT VERIFIED: {SINGLE_SCOPE}")
        if needs_shared and self.kit.shared_factory is None:
            return pytest.mark.skip(
                reason="NOT VERIFIED: needs a shared store (--chongming-shared-store "
                f"or {SHARED_ATTR} in the store's module)"
            )
        deviating = [c for c in cids if c in caps.deviations]
        if deviating:
            reasons = "; ".join(f"{c}: {caps.deviations[c]}" for c in deviating)
            return pytest.mark.xfail(strict=True, reason=f"declared deviation ({reasons})")
        return None

    def _arg_path(self, arg: str) -> Path:
        path = Path(arg.split("::", 1)[0])
        if not path.is_absolute():
            path = self.options.invocation_dir / path
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
        in_suite = [a for a in args if under(self._arg_path(a), SUITE_DIR)]
        covers = [a for a in args if "::" not in a and under(SUITE_DIR, self._arg_path(a))]
        if in_suite and explicit:
            whole = [a for a in in_suite if "::" not in a and self._arg_path(a) == SUITE_DIR]
            if not whole:
                named = {self._arg_path(a) for a in in_suite if "::" not in a}
                if any("::" in a for a in in_suite) or set(suite_files()) - named:
                    self.narrowed.append(
                        "suite narrowed to explicit paths or node ids: " + ", ".join(in_suite)
                    )
            if self.options.suite_only:
                self.config.args[:] = in_suite
            return
        files = [str(p) for p in suite_files()]
        if self.options.suite_only or not args:
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
        if top is None or not under(collection_path, top):
            return None
        if collection_path == SUITE_DIR or collection_path in SUITE_DIR.parents:
            return False  # on the way down to the suite
        if under(collection_path, SUITE_DIR):
            return None  # the suite's own files: pytest's usual rules
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makemodule(
        self, module_path: Path, parent: pytest.Collector
    ) -> pytest.Module | None:
        """Give suite modules outside the rootdir a readable node id.

        pytest names a file given as an argument outside the rootdir by nothing at
        all (``::TestStoreContract::test_x``); call it
        ``chongming_conformance/suite/test_x.py`` instead.
        """
        if not under(module_path.resolve(), SUITE_DIR):
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
        """Record each suite test's clauses, and mark what the declarations excuse."""
        for item in items:
            if not is_suite_item(item):
                continue
            cids = _item_clauses(item)
            nodeid = serial_nodeid(item.nodeid)
            self.declared[nodeid] = cids
            finds = tuple(c for c in _item_may_blame(item) if c not in cids)
            if finds:
                self.may_blame[nodeid] = finds
            # Carried to the controller under xdist, and into JUnit XML as properties.
            item.user_properties.extend(clause_properties(cids))
            if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
                self.hypothesis_items.add(nodeid)
            marker = self._marker(cids)
            if marker is not None:
                item.add_marker(marker)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        for item in items:
            if is_suite_item(item):
                self.deselected.append(serial_nodeid(item.nodeid))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and under(Path(str(report.fspath)).resolve(), SUITE_DIR):
            self.collection_errors.append(
                mask_secrets(elide(f"{report.nodeid}: {report.longreprtext}", MESSAGE_LIMIT))
            )

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        kept = {serial_nodeid(item.nodeid) for item in session.items}
        # Items deselected after our modifyitems ran are gone from session.items.
        self.declared = {n: c for n, c in self.declared.items() if n in kept}
        self.may_blame = {n: c for n, c in self.may_blame.items() if n in kept}
