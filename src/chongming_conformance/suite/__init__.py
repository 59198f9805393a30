"""The packaged suite: test modules the plugin adds to collection when a store is set.

When ``--chongming-store`` (or ``CHONGMING_STORE`` / ini ``chongming_store``)
is given, the plugin appends every ``test_*.py`` file of this directory to
pytest's arguments, so the suite runs from any directory, next to the user's
own tests. Nothing here runs without a configured store.

Adding a suite class: a new ``test_*.py`` file here whose class mixes
``_config.ConfiguredSeam`` into a kit base (any ``seam.StoreSeam``): the mixin
supplies ``make_store`` (the user's factory), ``wrap_store`` (every call timed)
and ``guard`` (opening and teardown timed), so each module is a few lines::

    # suite/test_properties.py
    from chongming_conformance.checking.properties import StoreProperties
    from chongming_conformance.suite._config import ConfiguredSeam

    class TestStoreProperties(ConfiguredSeam, StoreProperties):
        pass                                      # the class body is the base's

Cross-process bases take the shared opener instead::

    # suite/test_stress.py
    from chongming_conformance.stress import StressContract

    class TestStoreStress(StressContract):
        def make_shared_store(self):              # only runs when a shared store exists
            return _config.shared_store_factory()()

* Test methods (or the class) must be decorated with
  ``chongming_conformance.protocol.clauses.checks(...)``; the report maps results to
  clauses only through those declarations. A suite test without any is listed
  as "unmapped" in the report.
* Tests whose clauses have scope ``cross_process`` are skipped by the plugin
  (and their clauses reported NOT VERIFIED, never PASS) when
  ``_config.shared_store_factory()`` is None, and skipped as UNSUPPORTED when
  the store declares ``cross_process`` unsupported, so a stress class never
  has to check for itself. Code that needs the opener directly calls
  ``chongming_conformance.seam.factory.enter_opener(shared, exit_stack)`` (the one
  implementation, with every check).
* A ``RuleBasedStateMachine.TestCase`` collected directly (unittest style)
  maps to clauses through a ``checks(...)`` on the ``TestCase`` class.
* Mind the run time: every reference store runs the whole suite in
  tests/plugin; pass ``--chongming-profile=quick`` there if the property
  checks make it slow.
* Optional modules (properties, stateful, stress) should be imported at the
  top of their own ``test_*.py`` file: if one is missing or broken, that file
  errors at collection, the error shows in the run, and its clauses stay
  NOT VERIFIED.

Accessors for suite code live in :mod:`chongming_conformance.suite._config`:
``store_factory()``, ``shared_store_factory()``, ``timeout()``,
``capabilities()``, ``timed()``, ``guarded()`` and the ``ConfiguredSeam`` mixin.

The part ``suite`` (docs/architecture.md, "The parts") may import every part but
``commands`` and ``plugin``; its node ids (``chongming_conformance/suite/test_*.py::...``)
are in every report, so it stays where it is.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["SUITE_DIR", "suite_files"]

SUITE_DIR = Path(__file__).resolve().parent


def suite_files() -> list[Path]:
    """The suite's test modules, in a stable order."""
    return sorted(SUITE_DIR.glob("test_*.py"))
