"""A stateful model test: random call sequences over all 14 methods, store vs model.

Subclass like ``StoreContract``; a store factory is the only input::

    from chongming_conformance.checking.stateful import StoreStateMachineTests

    class TestMyStoreStateful(StoreStateMachineTests):
        def make_store(self):
            return MyStore(...)          # or a generator / context manager

``test_state_machine`` builds a ``RuleBasedStateMachine`` bound to that factory
and runs it with the settings of ``hypothesis_profiles.active_settings()`` (or
``hypothesis_settings``). Each run opens one fresh store, drives it and the
obviously-correct ``oracle.Model`` side by side, and closes it in teardown.

What the machine exercises:

* bundles of task ids and command ids, so later steps reuse earlier ones;
* an explicit integer clock (microseconds), advanced in steps that land just
  before, exactly on and just after lease boundaries (leases of 0.5, 1, 1.5 and
  5 s), with every ``now`` expressed in a random UTC offset;
* ``save`` with ``expect_version`` drawn from {stored-1, stored, stored+1} and
  new versions that skip (gap 1, small, or 2**40);
* claim / complete / release / expiry / re-claim, prune, duplicates,
  touch of missing tasks, appends replayed with identical content;
* ``close()`` late in a run, after which every method must raise StoreError;
* invariant after each step: counts() equals the model.

Where the contract allows several answers (ties in ``created_at`` for query,
claim and prune; a lease at exactly ``lease_until``; the order of a claim's
list) the model checks the store's answer is valid and adopts it. The machine
judges MUST clauses only, and never sends what the guide leaves open: no lease
of 0 or less, no ``limit=0``, no append for a task that does not exist, no save
whose version does not rise above ``expect_version``, no negative
``keep_terminal``, no complete or release of a command id never submitted. Where
only a SHOULD decides, it accepts either behaviour: a pruned task's commands
may be kept or dropped (PRUNE-COMMANDS) -- the machine completes them (a no-op or
a StoreError if they are gone: their ids are then unknown to the store) and adopts
whatever a re-submit of their id shows.

The machine is built in layers, each a private module with one job: ``_inputs``
(what it draws and sends), ``_state`` (store, model, clock, declared clauses),
``_task_rules`` and ``_command_rules`` (the rules by protocol group). This module adds the
clock, prune and close rules and the invariant, and is the one to import from.
"""

from __future__ import annotations

import functools
from datetime import UTC
from typing import ClassVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ...oracle import check_prune, expected_counts
from ...oracle.assertions import expect_raises as _raises
from ...oracle.blame import blamed
from ...oracle.confirm import confirming
from ...protocol.clauses import checks
from ...protocol.errors import StoreError
from ...seam import StoreSeam
from ..cases import counting
from ..hypothesis_profiles import active_settings
from ..observe import present
from ._command_rules import CommandRules
from ._inputs import _AFTER_CLOSE, _STEPS_US, EPOCH, REUSED_CLOSE_ODDS
from ._state import _RULE_CLAUSES, _blamed, _same

__all__ = ["EPOCH", "STATE_MACHINE_CLAUSES", "StoreStateMachine", "StoreStateMachineTests"]


class StoreStateMachine(CommandRules):
    """The machine; ``seam`` is set on the subclass made by ``StoreStateMachineTests``."""

    # -- clock ----------------------------------------------------------------------
    @precondition(lambda self: not self.closed)
    @rule(step=st.sampled_from(_STEPS_US))
    def advance_clock(self, step: int) -> None:
        self.clock_us += step

    # -- operations ------------------------------------------------------------------
    @precondition(lambda self: not self.closed)
    @rule(keep=st.integers(0, 4))
    @_blamed("PRUNE-TERMINAL-ONLY", "PRUNE-OLDEST-FIRST", "PRUNE-HISTORY")
    def prune(self, keep: int) -> None:
        returned = self.store.prune(keep_terminal=keep)
        left = present(self.store, self.model.tasks)
        dropped = set(self.model.tasks) - left
        check_prune(dropped, returned, self.model.tasks, keep)
        # The pruned tasks' commands may be kept or dropped (PRUNE-COMMANDS is a SHOULD,
        # checked by the contract alone): complete the unfinished ones -- a no-op or a
        # StoreError where they are gone -- so no later claim depends on which it chose.
        now = self.now(UTC)
        for command_id in self.model.adopt_prune(dropped):
            command = self.model.commands[command_id]
            if command.finished_at is None:
                self._finish(command_id, functools.partial(
                    self.store.complete_command, command_id, now=now, outcome="pruned"))
                self.model.complete(command_id, now, "pruned")

    @initialize(ticket=st.integers(0, REUSED_CLOSE_ODDS - 1))
    def decide_whether_to_close(self, ticket: int) -> None:
        self.may_close = not type(self).reuses_store or ticket == 0

    @precondition(
        lambda self: not self.closed and self.steps >= self.close_after and self.may_close
    )
    @rule()
    @_blamed("CLOSE-IDEMPOTENT")
    def close(self) -> None:
        self.store.close()
        self.store.close()  # idempotent
        self.closed = True

    @precondition(lambda self: self.closed)
    @rule(method=st.sampled_from(sorted(_AFTER_CLOSE)))
    @_blamed("CLOSE-THEN-STOREERROR")
    def use_after_close(self, method: str) -> None:
        _raises(StoreError, lambda: _AFTER_CLOSE[method](self.store), f"{method}() after close()")

    # -- invariants ------------------------------------------------------------------
    @invariant()
    @_blamed("COUNTS-PER-STATUS", "COUNTS-ALL-KEYS")
    def counts_match(self) -> None:
        self.steps += 1
        if not self.closed:
            want, got = expected_counts(self.model.tasks.values()), dict(self.store.counts())
            # The invariant declares two clauses, so a failure it does not pin would be
            # blamed on neither: only zero keys missing is COUNTS-ALL-KEYS, else (a number
            # wrong) COUNTS-PER-STATUS, as the property test_counts_match_model blames.
            only_zeros = all(want[k] == 0 for k in set(want) - set(got)) and all(
                got[k] == want.get(k) for k in got
            )
            blamed(("COUNTS-ALL-KEYS" if only_zeros else "COUNTS-PER-STATUS",),
                   functools.partial(_same, want, got, "counts()"))


#: What ``test_state_machine`` declares: every clause its rules exercise or can blame.
STATE_MACHINE_CLAUSES: tuple[str, ...] = tuple(_RULE_CLAUSES)


class StoreStateMachineTests(StoreSeam):
    """Runs ``StoreStateMachine`` against ``make_store``; subclass and implement it.

    The store comes through the seam every single-connection base shares
    (:class:`chongming_conformance.seam.StoreSeam`): ``make_store`` plus the
    optional ``wrap_store`` / ``guard``.
    """

    hypothesis_settings: ClassVar[settings | None] = None

    def state_machine_class(self) -> type[StoreStateMachine]:
        """A ``StoreStateMachine`` subclass bound to this instance's seam."""
        return self._machine(self.hypothesis_settings or active_settings())

    def _machine(self, chosen: settings) -> type[StoreStateMachine]:
        return type(
            f"{type(self).__name__}Machine",
            (StoreStateMachine,),
            {
                "seam": self,
                # close() in the last fifth of a full-length run.
                "close_after": max(chosen.stateful_step_count * 4 // 5, 1),
                "reuses_store": self.reset_function() is not None,
            },
        )

    @checks(*STATE_MACHINE_CLAUSES)
    def test_state_machine(self) -> None:
        """Random sequences of all 14 methods agree with the model at every step."""
        chosen = self.hypothesis_settings or active_settings()
        # A culprit guessed from the shape of a difference is checked on a fresh store
        # before it is blamed (confirm.py).
        with confirming(self.opened_store), counting("test_state_machine"):
            run_state_machine_as_test(self._machine(chosen), settings=chosen)
