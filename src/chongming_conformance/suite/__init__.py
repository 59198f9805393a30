"""The packaged suite: test modules the plugin adds to collection when a store is set.

When ``--chongming-store`` (or ``CHONGMING_STORE`` / ini ``chongming_store``)
is given, the plugin appends every ``test_*.py`` file of this directory to
pytest's arguments, so the suite runs from any directory, next to the user's
own tests. Nothing here runs without a configured store.

Adding a suite class (the pattern every module here follows)::

    # suite/test_properties.py
    from chongming_conformance.properties import StoreProperties
    from chongming_conformance.suite import _config


    class TestStoreProperties(StoreProperties):
        def make_store(self):
            return _config.store_factory()()      # the user's factory, any form

        def open_store(self):                     # every call under the timeout
            return _config.open_timed(super().open_store)

        def teardown_method(self, method=None):   # a hung close() fails, not hangs
            _config.teardown_timed(lambda: super(TestStoreProperties, self)
                                   .teardown_method(method))

  (Only where the base class has these hooks: ``StoreProperties`` opens a
  store per example through ``fresh_store()``; wrap that instead, or accept
  that hypothesis-driven checks rely on their own deadlines.)

* Test methods (or the class) must be decorated with
  ``chongming_conformance.clauses.checks(...)``; the report maps results to
  clauses only through those declarations. A suite test without any is listed
  as "unmapped" in the report.
* Tests whose clauses have scope ``cross_process`` are skipped by the plugin
  (and their clauses reported NOT VERIFIED, never PASS) when
  ``_config.shared_store_factory()`` is None, and skipped as UNSUPPORTED when
  the store declares ``cross_process`` unsupported. A stress scenario class
  therefore only needs, when it runs::

      shared = _config.shared_store_factory()   # not None here
      with contextlib.ExitStack() as stack:
          opener = _config.enter_opener(shared, stack)   # picklable, zero-arg
          ...  # ship ``opener`` to spawned workers; each calls opener()

* Stateful tests (``RuleBasedStateMachine.TestCase``) are collected like any
  unittest class; decorate the ``TestCase`` class itself with ``checks(...)``.
* Optional modules (properties, stateful, stress) should be imported at the
  top of their own ``test_*.py`` file: if one is missing or broken, that file
  errors at collection, the error shows in the run, and its clauses stay
  NOT VERIFIED.

Accessors for suite code live in :mod:`chongming_conformance.suite._config`:
``store_factory()``, ``shared_store_factory()``, ``timeout()``,
``capabilities()``, ``open_timed()`` and ``enter_opener()``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["SUITE_DIR", "suite_files"]

SUITE_DIR = Path(__file__).resolve().parent


def suite_files() -> list[Path]:
    """The suite's test modules, in a stable order."""
    return sorted(SUITE_DIR.glob("test_*.py"))
