"""The one-process checks: every check base a store's tests subclass, and what they share.

(Named ``checking``, not ``checks``: ``chongming_conformance.checks`` is the decorator that
ties a test to its clauses, and a subpackage of that name would replace it on the package
the moment it is imported.)

The part ``checking`` (docs/architecture.md, "The parts") owns

* :mod:`.contract` -- ``StoreContract``, the contract tests by protocol group;
* :mod:`.properties` -- ``StoreProperties`` and ``CodecProperties``, the property checks;
* :mod:`.stateful` -- ``StoreStateMachine`` / ``StoreStateMachineTests``, the state machine
  and its private rule modules;
* :mod:`.controller` -- ``ControllerContract``, the reference controller run on the store;
* what they share: :mod:`.cases` (the input cases that matter, marked and counted),
  :mod:`.observe` (reads a check makes only to look, blamed on their own clause) and
  :mod:`.hypothesis_profiles` (quick, ci, thorough).

Each family is imported from its own module (``chongming_conformance.checking.contract``,
...); this package re-exports nothing, so importing one family loads no other. It may
import ``seam``, ``report``, ``strategies``, ``oracle``, ``controller``, ``faults`` and
``protocol``; never ``stress``, ``attest``, ``commands``, ``suite`` or ``plugin``.
"""
