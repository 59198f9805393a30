"""The contract's command tests that submit several commands give each its own task.

A shared task id ("task-1" by default) is incidental structure: nothing those tests prove
is about several commands of one task, and a correct store that keeps one command per task
(the controller issues one at a time) could trip on it. Each test below runs on a store that
records the task of every submitted command; the tasks must be distinct. The claim order,
limit, precision and completion tests still prove what they did: their teeth are in
tests/test_teeth.py (ClaimInsertionOrder and the others).
"""

from __future__ import annotations

import pytest

from chongming_conformance import Command
from chongming_conformance.checking.contract import StoreContract
from reference_stores.memory import InMemoryTaskStore

#: The command tests submitting more than one command, none of which needs a shared task.
SEVERAL_COMMANDS = (
    "test_claim_order__oldest_first_by_instant",
    "test_claim_limit__only_limit_are_leased",
    "test_claim_lease_precise__fractional_seconds",
    "test_complete_never_reclaimed__claimed_then_completed",
    "test_complete_idempotent__twice_and_unknown",
    "test_claim_expired_reclaim__completing_one_id_leaves_look_alikes",
)


class RecordsTasks(InMemoryTaskStore):
    def __init__(self) -> None:
        super().__init__()
        self.tasks: list[str] = []

    def submit_command(self, command: Command) -> None:
        self.tasks.append(command.task_id)
        super().submit_command(command)


@pytest.mark.parametrize("name", SEVERAL_COMMANDS)
def test_each_command_has_its_own_task(name: str) -> None:
    stores: list[RecordsTasks] = []

    class Contract(StoreContract):
        def make_store(self) -> RecordsTasks:
            store = RecordsTasks()
            stores.append(store)
            return store

    case = Contract()
    case.setup_method()
    try:
        getattr(case, name)()
    finally:
        case.teardown_method()
    [store] = stores
    assert len(store.tasks) > 1, store.tasks
    assert len(set(store.tasks)) == len(store.tasks), f"{name} shares a task: {store.tasks}"
