"""The state machine's bookkeeping: its store, model, clock, bundles and declared clauses.

One job: what every rule of the machine shares -- the store opened through the seam and
closed in teardown, the ``oracle.Model`` beside it, the integer clock, the bundles of ids,
and ``_blamed``, which records the clauses each rule declares (in rule order) for
``STATE_MACHINE_CLAUSES``. Split out so the rule modules (``_task_rules``,
``_command_rules``) hold only rules. Private: use
:class:`chongming_conformance.checking.stateful.StoreStateMachine`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from datetime import datetime, timedelta, tzinfo
from typing import Any, ClassVar, TypeVar, cast

from hypothesis.stateful import Bundle, RuleBasedStateMachine

from ...oracle import Model
from ...oracle.blame import blame
from ...protocol import TaskStore
from ...protocol.clauses import checks
from ...seam import StoreSeam
from ._inputs import EPOCH

__all__ = ["MachineState"]

#: Every clause a rule of the machine exercises or can blame, in rule order: filled by
#: ``_blamed`` as the machine's class body runs, and read once after it
#: (:data:`STATE_MACHINE_CLAUSES`), so what ``test_state_machine`` declares is exactly
#: what its rules can blame -- a blame on an undeclared clause cannot happen.
_RULE_CLAUSES: dict[str, None] = {}


def _same(expected: object, actual: object, what: str) -> None:
    assert actual == expected, f"{what}:\n  expected {expected!r}\n  got      {actual!r}"


F = TypeVar("F", bound=Callable[..., Any])

def _blamed(*clause_ids: str) -> Callable[[F], F]:
    """Declare the clauses a rule exercises or can blame (see ``_RULE_CLAUSES``).

    The rule's own checks blame the one clause a failure shows. A failure they did not
    pin is blamed on the rule's clause when it has just one; with several, blaming them
    all would be FAIL by association, so it stays unattributed (NOT VERIFIED).
    """
    checks(*clause_ids)  # unknown ids fail at import
    _RULE_CLAUSES.update(dict.fromkeys(clause_ids))

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except Exception as exc:
                if len(clause_ids) == 1:
                    blame(exc, clause_ids)
                raise

        return cast(F, wrapper)

    return decorate


class MachineState(RuleBasedStateMachine):
    """The machine's store, model, clock and bundles; the rules are added by the subclasses."""

    #: Where the machine's store comes from (``make_store`` / ``wrap_store`` / ``guard``).
    seam: ClassVar[StoreSeam]
    #: close() becomes possible only after this many steps, so a run explores first
    #: (set from ``stateful_step_count`` by ``StoreStateMachineTests``).
    close_after: ClassVar[int] = 40
    #: Whether the store is reused between runs (a ``reset_store``): a closed store cannot
    #: be, so the next run pays a factory call; such runs then close their store in one run
    #: out of :data:`REUSED_CLOSE_ODDS` (drawn, so a replayed example closes again).
    reuses_store: ClassVar[bool] = False

    tasks = Bundle("tasks")
    commands = Bundle("commands")

    def __init__(self) -> None:
        super().__init__()
        self._stack = contextlib.ExitStack()
        try:
            self.store: TaskStore = type(self).seam.open_into(self._stack)
        except BaseException:
            type(self).seam.close_stack(self._stack)
            raise
        self.model = Model()
        #: Every task id ever created (a pruned task's history must be gone too).
        self.created: set[str] = set()
        self.clock_us = 0
        self.steps = 0
        self.closed = False
        self.may_close = True
        #: How many one-field saves this run made: each changes the next field in
        #: ``SAVED_FIELDS`` (from a start taken from the drawn donor, so a replayed example
        #: changes the same fields).
        self.one_field_turn = 0

    def teardown(self) -> None:
        type(self).seam.close_stack(self._stack)

    def now(self, zone: tzinfo) -> datetime:
        """The current instant, expressed in ``zone``."""
        return (EPOCH + timedelta(microseconds=self.clock_us)).astimezone(zone)
