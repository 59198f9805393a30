"""The packaged suite: test modules the plugin adds to collection when a store is set.

When ``--chongming-store`` (or ``CHONGMING_STORE`` / ini ``chongming_store``)
is given, the plugin appends every ``test_*.py`` file of this directory to
pytest's arguments, so the suite runs from any directory, next to the user's
own tests. Nothing here runs without a configured store.

Adding a suite class: subclass the kit's base class in a new ``test_*.py``
file here and point it at the configured store. ``test_contract.py`` is the
model (``make_store`` + ``open_store`` + ``teardown_method`` under the
timeout). The other bases, as verified against their current APIs::

    # suite/test_properties.py
    import contextlib
    from chongming_conformance.properties import StoreProperties
    from chongming_conformance.suite import _config

    class TestStoreProperties(StoreProperties):
        def make_store(self):
            return _config.store_factory()()      # the user's factory, any form

        @contextlib.contextmanager
        def fresh_store(self):                    # one store per example, calls timed
            with super().fresh_store() as store:
                yield _config.timed(store)

    # suite/test_stateful.py
    from chongming_conformance.stateful import StoreStateMachineTests

    class TestStoreStateMachine(StoreStateMachineTests):
        def make_store(self):
            return _config.store_factory()()

    # suite/test_stress.py
    from chongming_conformance.stress import StressContract

    class TestStoreStress(StressContract):
        def make_shared_store(self):              # only runs when a shared store exists
            return _config.shared_store_factory()()

* Test methods (or the class) must be decorated with
  ``chongming_conformance.clauses.checks(...)``; the report maps results to
  clauses only through those declarations. A suite test without any is listed
  as "unmapped" in the report.
* Tests whose clauses have scope ``cross_process`` are skipped by the plugin
  (and their clauses reported NOT VERIFIED, never PASS) when
  ``_config.shared_store_factory()`` is None, and skipped as UNSUPPORTED when
  the store declares ``cross_process`` unsupported, so a stress class never
  has to check for itself. Code that needs the opener directly can use
  ``_config.enter_opener(shared, exit_stack)`` (the one implementation,
  ``chongming_conformance.factory.enter_opener``, with every check).
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
``capabilities()``, ``open_timed()``, ``timed()``, ``teardown_timed()`` and
``enter_opener()``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["SUITE_DIR", "suite_files"]

SUITE_DIR = Path(__file__).resolve().parent


def suite_files() -> list[Path]:
    """The suite's test modules, in a stable order."""
    return sorted(SUITE_DIR.glob("test_*.py"))
