"""One configured run: wires collection and harvest, then hands records to the report package.

Registered by ``pytest_configure`` only when a store is configured. At the end
of the session it asks :func:`~chongming_conformance.report.assess` for the
outcomes, applies the gate to pytest's exit status, writes the reports and
prints the clause table. It decides nothing itself.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from .. import __version__
from ..checking.hypothesis_profiles import PROFILES, active_profile_name
from ..faults.deployment import describe_topology
from ..protocol.clauses import CATALOGUE_VERSION, unjudged_fault_clauses
from ..report import (
    Assessment,
    RunSettings,
    StoreInfo,
    StoreReuseInfo,
    assess,
    build_document,
    describe_environment,
    exit_status,
    mask_secrets,
    render_cases,
    render_gate,
    render_terminal,
)
from ..report.formats import write_report
from ..seam import reuse
from ..seam.timeouts import mechanism
from ..suite._config import KitConfig
from .collection import SuiteCollection
from .distribution import Distribution, is_worker
from .harvest import Harvest
from .options import Options
from .progress import Progress

__all__ = ["INTERRUPTED_REASON", "ConformanceRun"]

#: The partial reason an interrupted run's report gives.
INTERRUPTED_REASON = "the run was interrupted (SIGINT/Ctrl-C or SIGTERM) before it finished"


class ConformanceRun:
    """Session-level hooks of a configured run: header, report files, terminal summary."""

    def __init__(self, config: pytest.Config, options: Options, kit: KitConfig,
                 described: str) -> None:
        self.config = config
        self.options = options
        self.kit = kit
        self.store_type, _, self.store_repr = described.partition("\n")
        self.started = time.time()
        self.collection = SuiteCollection(config, options, kit)
        self.harvest = Harvest(self.collection, options.deselecting)
        self.distribution = Distribution(config, self.collection)
        self.assessment: Assessment | None = None
        self.doc: dict[str, Any] | None = None
        self.reports_written: list[Path] = []
        #: Why the attestation asked for was not written (None: written or not asked).
        self.attest_problem: str | None = None
        self.reuse_counts: dict[str, int] = {}

    def register(self) -> None:
        """Put the suite in the arguments and register this run's hook objects."""
        self.collection.add_suite_to_args()
        manager = self.config.pluginmanager
        manager.register(self.collection, "chongming-conformance-collection")
        manager.register(self.harvest, "chongming-conformance-harvest")
        manager.register(self.distribution, "chongming-conformance-distribution")
        if not is_worker(self.config):  # a worker's terminal is not shown
            stress = self.kit.stress_profile if self.kit.shared_factory is not None else None
            thorough = active_profile_name() == PROFILES["thorough"]
            manager.register(Progress(self.config, stress, thorough),
                             "chongming-conformance-progress")
        manager.register(self, "chongming-conformance-run")

    def _topology(self) -> str:
        """What the cross-process verdicts ran on and under (docs/faults.md)."""
        kit = self.kit
        return describe_topology(getattr(kit.stress_profile, "faults", "none"),
                                 kit.capabilities.unsupported.get("network"), kit.deployment,
                                 str(kit.shared_spec))

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
        if kit.shared_spec:
            lines.append(f"chongming: {self._topology()}")
        if kit.reset_spec is not None:
            lines.append(
                f"chongming: store reuse: {kit.reset_spec} empties one kept store per process "
                "between tests and examples (--chongming-no-reuse opens a new one each time)"
            )
        if kit.capabilities.unsupported or kit.capabilities.deviations:
            lines.append(
                f"chongming: declared in {kit.capabilities.origin}: unsupported "
                f"{dict(kit.capabilities.unsupported)}, deviations "
                f"{sorted(kit.capabilities.deviations)}"
            )
        return [mask_secrets(line) for line in lines]

    def build(self, session: pytest.Session) -> dict[str, Any]:
        """Assess the harvested records, apply the gate to the exit status, lay out the document."""
        kit, options = self.kit, self.options
        shared = kit.shared_factory is not None
        records = self.harvest.records()
        usage = self.harvest.usage_errors()
        if usage:
            # A reset_store that did not empty the store stopped the run: no verdict is drawn
            # from it, and the exit status is the usage error's, as for any bad setting.
            records = dataclasses.replace(
                records, narrowed=(*records.narrowed, *(f"stopped by a usage error: {u}"
                                                         for u in usage)),
            )
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        if session.exitstatus == pytest.ExitCode.INTERRUPTED:
            # Ctrl-C (or SIGTERM, see signals.py): the report is still written, and says why
            # it proves less than a whole run.
            records = dataclasses.replace(
                records, narrowed=(*records.narrowed, INTERRUPTED_REASON)
            )
        faults = getattr(kit.stress_profile, "faults", "none") if shared else "none"
        crash_offered = kit.deployment is not None and bool(kit.deployment.crashes)
        self.assessment = assessment = assess(
            records, kit.capabilities, shared_available=shared, gate=options.gate,
            faults=faults,
            unjudged=unjudged_fault_clauses(faults, crash_offered=crash_offered),
        )
        # With a gate the exit status is the gate's (a SHOULD failure does not fail a must
        # gate); without one it stays pytest's. Decided in report.outcomes, with the verdict.
        session.exitstatus = pytest.ExitCode(
            exit_status(assessment.gate_passed, int(session.exitstatus))
        )
        stress = kit.stress_profile
        settings = RunSettings(
            started=self.started,
            finished=time.time(),
            timeout_s=kit.timeout,
            timeout_mechanism=mechanism(),
            profile=active_profile_name(),
            stress_profile=dataclasses.asdict(stress) if stress is not None and shared else None,
            hypothesis_seed=options.hypothesis_seed,
            pytest_exit_status=int(session.exitstatus),
            store_reuse=self._store_reuse(),
            topology=self._topology() if shared else None,
            seed=options.seed,
        )
        store = StoreInfo(
            spec=kit.store_spec,
            source=kit.store_source,
            type=self.store_type or None,
            repr=self.store_repr or None,
            shared_spec=kit.shared_spec,
            shared_source=kit.shared_source,
        )
        return build_document(
            assessment,
            store=store,
            environment=describe_environment(pytest.__version__),
            settings=settings,
            capabilities=kit.capabilities,
            tests_collected=len(self.collection.declared),
            collection_errors=list(self.collection.collection_errors),
        )

    def _store_reuse(self) -> StoreReuseInfo | None:
        if self.kit.reset_spec is None:
            return None
        counts = {**self.reuse_counts}
        for key, value in self.distribution.reuse_totals.items():
            counts[key] = counts.get(key, 0) + value
        return StoreReuseInfo(
            reset_store=self.kit.reset_spec,
            stores_opened=counts.get("stores_opened", 0),
            reuses=counts.get("reuses", 0),
        )

    def _close_kept_stores(self) -> None:
        """Close the stores this process kept for reuse and tear their factories down."""
        self.reuse_counts = reuse.summary()
        try:
            reuse.shutdown_all()
        except Exception as exc:  # after every test: a teardown problem is shown, not lost
            warnings.warn(pytest.PytestWarning(mask_secrets(
                f"chongming: closing a kept store raised {type(exc).__name__}: {exc}")),
                stacklevel=1)
        self.distribution.send_reuse(self.reuse_counts)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self._close_kept_stores()
        if self.options.collect_only or is_worker(self.config):
            return  # under xdist the controller assesses and writes the reports
        self.doc = self.build(session)
        for target in self.options.reports:
            # The path was checked before the run (options._reports); the write is atomic,
            # so a CI gate reads the previous report or this one, never half of one.
            write_report(self.doc, target)
            self.reports_written.append(target)
        self._write_attestation(session)

    def _write_attestation(self, session: pytest.Session) -> None:
        """The attestation and the badge, from the document just written (docs/attestation.md).

        A statement that cannot be made (the store's code not found on disk, a key that
        does not sign) is said in the summary and fails the run: the user asked for
        evidence that is not there.
        """
        from ..attest import write_attestation, write_badge

        assert self.doc is not None
        options = self.options
        if options.badge is not None:
            write_badge(self.doc, options.badge)
            self.reports_written.append(options.badge)
        if options.attest is None:
            return
        try:
            write_attestation(self.doc, options.attest, options.attest_key)
        except (LookupError, ValueError, OSError, RuntimeError) as exc:
            self.attest_problem = mask_secrets(f"{type(exc).__name__}: {exc}")
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        self.reports_written.append(options.attest)

    def pytest_terminal_summary(
        self, terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
    ) -> None:
        if self.doc is None or self.assessment is None:
            return
        tr = terminalreporter
        tr.write_sep("=", f"chongming conformance: {mask_secrets(self.kit.store_spec)}")
        for line, colour in render_terminal(self.doc):
            tr.write_line(line, **({colour: True} if colour else {}))
        if self.options.show_cases:
            tr.write_sep("-", "chongming input cases met (examples per case)")
            for line in render_cases(self.doc) or ["no generated check recorded input cases"]:
                tr.write_line(line)
        gate = render_gate(self.doc, [r.clause.id for r in self.assessment.gate_failed])
        if gate is not None:
            text, colour = gate
            tr.write_line(text, **{colour: True, "bold": colour == "red"})
        for target in self.reports_written:
            tr.write_line(f"chongming report written to {target}")
        if self.attest_problem is not None:
            tr.write_line(f"chongming attestation NOT written to {self.options.attest}: "
                          f"{self.attest_problem}", red=True, bold=True)
