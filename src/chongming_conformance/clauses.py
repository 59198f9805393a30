"""The clause catalogue: every requirement a store must meet, with a stable ID.

Each clause has a level (MUST or SHOULD, as in RFC 2119), the section of the
original backend guide it comes from (``§2.1`` ... ``§9``; ``decision`` marks a
point the guide left open and this kit decided), a scope, and one sentence.

Scopes say *how* a clause can be checked:

* ``contract`` -- observable through one connection; the contract suite, the
  hypothesis properties and the state machine check it.
* ``cross_process`` -- only observable with several processes sharing one
  store; the stress harness checks it. A store that cannot be shared gets
  these reported NOT VERIFIED, never PASS.
* ``review`` -- not observable through the protocol at all (where a filter
  runs, whether a file handle is really released). The kit reports these NOT
  VERIFIED with a note and the reference stores prove them with their own
  tests (``EXPLAIN``); they are excluded from ``--chongming-gate``.

Every check in the kit declares the clauses it covers with :func:`checks`;
naming an unknown clause fails at import time, and the project's own tests
fail if a non-review clause has no check.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "CATALOGUE_VERSION",
    "CLAUSES",
    "Clause",
    "Level",
    "Scope",
    "checks",
    "clauses_of",
]

#: Bumped whenever a clause is added, removed, or its meaning changes.
CATALOGUE_VERSION = "1.1"

CLAUSE_ATTR = "__chongming_clauses__"


class Level(enum.Enum):
    """RFC 2119 strength of a clause."""

    MUST = "MUST"
    SHOULD = "SHOULD"


class Scope(enum.Enum):
    """How a clause can be checked (see module docstring)."""

    CONTRACT = "contract"
    CROSS_PROCESS = "cross_process"
    REVIEW = "review"


@dataclass(frozen=True, slots=True)
class Clause:
    """One requirement: ``id`` is stable across releases and safe to cite."""

    id: str
    level: Level
    section: str
    scope: Scope
    text: str


_M, _S = Level.MUST, Level.SHOULD
_C, _X, _R = Scope.CONTRACT, Scope.CROSS_PROCESS, Scope.REVIEW

_TABLE: tuple[tuple[str, Level, str, Scope, str], ...] = (
    # -- structure -----------------------------------------
    ("PROTOCOL-METHODS", _M, "§1 §8", _C,
     "The store has all 14 TaskStore methods with the protocol's parameter names, "
     "defaults and keyword-only markers; no inheritance or registration is needed."),
    # -- create / get --------------------------------------
    ("CREATE-THEN-GET", _M, "§2.1", _C,
     "After create(s), get(s.task_id) returns a snapshot equal to s."),
    ("CREATE-DUPLICATE-RAISES", _M, "§2.1 §8 §9", _C,
     "create() with an existing task_id raises StoreError and leaves the stored task "
     "unchanged (never a silent overwrite)."),
    ("XP-CREATE-EXCLUSIVE", _M, "§2.1 §2.4 §8 §9", _X,
     "When several processes create the same task_id (or submit the same command_id) at "
     "once, exactly one succeeds, the others raise StoreError, and the stored record is "
     "the winner's."),
    ("GET-MISSING-NONE", _M, "§2.1", _C,
     "get() of an unknown task_id returns None and does not raise."),
    # -- save ----------------------------------------------
    ("SAVE-CAS", _M, "§2.1 §8", _C,
     "save(s, expect_version=v) succeeds when the stored status_version equals v, and "
     "afterwards get() returns s (lease fields aside)."),
    ("SAVE-CONFLICT-RAISES", _M, "§2.1 §3 §8", _C,
     "save() with an expect_version below or above the stored version raises "
     "ConcurrencyConflict and changes nothing."),
    ("SAVE-CONFLICT-DETAILS", _S, "decision", _C,
     "The ConcurrencyConflict carries task_id, the expected version and the stored one."),
    ("SAVE-NO-AUTO-RETRY", _M, "§2.1 §3 §8", _C,
     "A conflicting save is reported, never retried against the newer row: the other "
     "writer's snapshot stays in the store."),
    ("SAVE-VERSION-SKIP", _M, "§2.1 §3 §8", _C,
     "save() accepts a snapshot whose status_version jumps by any amount (2 -> 4); the "
     "only check is expect_version == stored version, never 'new == old + 1'."),
    ("SAVE-KEEPS-LEASE", _M, "§2.3 §3 §8", _C,
     "save() never writes lease_owner or lease_until: the lease written by create or "
     "touch survives a save whose snapshot carries another (usually None) lease."),
    ("SAVE-MISSING-RAISES", _M, "decision", _C,
     "save() of a task that does not exist raises ConcurrencyConflict (actual=None) "
     "and does not create it."),
    ("XP-SAVE-ATOMIC", _M, "§2.1 §3 §8 §9", _X,
     "When several processes save the same task at the same expect_version, exactly one "
     "succeeds and the others raise ConcurrencyConflict (check and write are one step)."),
    # -- query ---------------------------------------------
    ("QUERY-ALL", _M, "§2.1", _C,
     "query(), query(None) and query(TaskQuery()) return every task; an empty store "
     "returns an empty sequence."),
    ("QUERY-ORDER-CREATED", _M, "§2.1", _C,
     "Results are ordered by created_at ascending, or descending with newest_first."),
    ("QUERY-TIES-COMPLETE", _M, "decision", _C,
     "Tasks with equal created_at are all returned; their relative order is unspecified "
     "(the kit accepts any)."),
    ("QUERY-STATUSES", _M, "§2.1", _C,
     "statuses returns exactly the tasks whose status is in the set."),
    ("QUERY-NAME-EXACT", _M, "§2.1", _C,
     "name matches by exact, case-sensitive equality."),
    ("QUERY-NAME-PREFIX-LITERAL", _M, "§2.1 decision", _C,
     "name_prefix is a literal, case-sensitive prefix: '%', '_' and '\\' match only "
     "themselves."),
    ("QUERY-TAG-EXACT", _M, "§2.1 §8 §9", _C,
     "tag matches tasks having exactly that tag ('io' matches neither 'ios' nor 'bio'), "
     "case-sensitively, including tags with quotes, commas and brackets."),
    ("QUERY-BUCKETS", _M, "§2.1", _C,
     "buckets returns exactly the tasks whose bucket is in the set; a task without a "
     "bucket never matches."),
    ("QUERY-PIPELINE", _M, "§2.1", _C,
     "pipeline_run_id returns exactly the tasks of that pipeline run."),
    ("QUERY-LIMIT", _M, "§2.1 decision", _C,
     "limit returns the first N tasks in the requested order; limit=0 returns none."),
    ("QUERY-FILTERS-COMBINE", _M, "§2.1", _C,
     "All given filters apply together (AND)."),
    ("QUERY-EMPTY-SET-MATCHES-NOTHING", _M, "decision", _C,
     "An empty statuses or buckets collection is a filter that matches nothing, "
     "not 'no filter' (None is 'no filter')."),
    ("QUERY-PUSHDOWN", _S, "§2.1 §8", _R,
     "Filters, above all buckets, are evaluated by the backend (index), not by fetching "
     "every row and filtering in Python."),
    # -- counts --------------------------------------------
    ("COUNTS-PER-STATUS", _M, "§2.1", _C,
     "counts() maps each status to the number of tasks in it."),
    ("COUNTS-ALL-KEYS", _M, "decision", _C,
     "counts() has a key for every TaskStatus, with 0 where there are no tasks."),
    ("COUNTS-AGGREGATED", _S, "§2.1", _R,
     "counts() is computed by the backend (GROUP BY), not by reading every record."),
    # -- history -------------------------------------------
    ("APPEND-IDEMPOTENT", _M, "§2.2 §3 §8 §9", _C,
     "Appending a transition whose (task_id, version) exists leaves exactly one row."),
    ("APPEND-FIRST-WINS", _S, "decision", _C,
     "A replayed append with different content keeps the first row (DO NOTHING, not "
     "upsert)."),
    ("HISTORY-ORDERED", _M, "§2.2 §8", _C,
     "history() returns transitions ascending by version, whatever the append order."),
    ("HISTORY-SINCE", _M, "§2.2 §8", _C,
     "history(since_version=v) returns exactly the transitions with version > v."),
    ("HISTORY-PER-TASK", _M, "§2.2", _C,
     "history(t) returns only task t's transitions."),
    ("HISTORY-UNKNOWN-EMPTY", _M, "decision", _C,
     "history() of a task with no transitions returns an empty sequence."),
    ("TRANSITION-ROUNDTRIP", _M, "§4", _C,
     "Every field of a transition survives append/history unchanged."),
    ("XP-APPEND-REPLAY", _M, "§2.2 §3", _X,
     "Processes appending the same transitions concurrently leave exactly one row per "
     "(task_id, version)."),
    # -- touch ---------------------------------------------
    ("TOUCH-NO-VERSION", _M, "§2.3 §3 §8 §9", _C,
     "touch() never checks or changes status_version; a save with the pre-touch version "
     "still succeeds."),
    ("TOUCH-ONLY-NAMED-FIELDS", _M, "§2.3 §8", _C,
     "touch() changes exactly the fields passed as non-None; each argument is "
     "independently optional; with all None nothing changes."),
    ("TOUCH-MISSING-IGNORED", _M, "§2.3 §8", _C,
     "touch() of an unknown task_id does nothing and does not raise."),
    ("TOUCH-LEASE", _M, "§2.3 §8", _C,
     "touch() stores lease_owner and lease_until as given, and get() returns them."),
    ("TOUCH-SIGNALS-SEPARATE", _M, "§2.3", _C,
     "heartbeat_at and the lease are stored verbatim and independently: writing one "
     "never derives or moves the other."),
    ("XP-TOUCH-SAVE", _M, "§2.3 §3", _X,
     "With one process touching at high rate and another saving, no save conflicts "
     "because of a touch, the lease is never clobbered, and only saves move the version."),
    ("XP-SAVE-KEEPS-LEASE", _M, "§2.1 §2.3 §8", _X,
     "While one process renews a task's lease with touch and another keeps saving the "
     "task, the lease read after both stop is the renewer's latest (no save carries an "
     "older lease back)."),
    ("XP-TOUCH-VISIBLE", _M, "§2.3 §7 §8", _X,
     "A touch is committed when it returns: another process reads its progress, "
     "heartbeat and lease at once, even if the toucher writes nothing else."),
    # -- commands ------------------------------------------
    ("SUBMIT-THEN-CLAIM", _M, "§2.4", _C,
     "A submitted command is returned by claim_commands with its fields intact, "
     "lease_until = now + lease_seconds and finished_at None."),
    ("SUBMIT-DUPLICATE-RAISES", _M, "decision", _C,
     "submit_command() with an existing command_id raises StoreError and leaves the "
     "stored command unchanged."),
    ("CLAIM-LEASE-EXCLUSIVE", _M, "§2.4 §3", _C,
     "A command whose lease has not expired is not returned by another claim."),
    ("CLAIM-LEASE-BOUNDARY", _M, "decision", _C,
     "A lease covers [claim time, lease_until): the command is claimable again at "
     "now == lease_until, not a microsecond before."),
    ("CLAIM-EXPIRED-RECLAIM", _M, "§2.4 §3 §8", _C,
     "After its lease expires an unfinished command is claimable again."),
    ("CLAIM-ORDER", _M, "§2.4", _C,
     "claim_commands() takes commands in created_at order (by instant)."),
    ("CLAIM-LIMIT", _M, "§2.4 decision", _C,
     "claim_commands() returns at most limit commands and leases only those; limit=0 "
     "leases nothing."),
    ("XP-CLAIM-EXCLUSIVE", _M, "§2.4 §3 §8 §9", _X,
     "Consumers in several processes never hold the same command at the same instant, "
     "none is lost, none is completed twice."),
    ("XP-CLAIM-CRASH-RECOVERY", _M, "§3 §9", _X,
     "A command held by a SIGKILLed process is not claimable before its lease_until, is "
     "claimable from then on, and the store is intact."),
    ("COMPLETE-NEVER-RECLAIMED", _M, "§2.4", _C,
     "A completed command (claimed or not) is never claimed again, even after its lease "
     "would have expired."),
    ("COMPLETE-IDEMPOTENT", _M, "decision", _C,
     "complete_command() of an already completed or unknown command_id does not raise and "
     "changes nothing."),
    ("RELEASE-NOT-COMPLETE", _M, "§2.4 §8 §9", _C,
     "release_command() clears the lease without finishing: the command is claimable "
     "again at once."),
    ("RELEASE-FINISHED-NOOP", _M, "decision", _C,
     "release_command() of a completed or unknown command does not raise and does not "
     "make it claimable."),
    ("XP-RELEASE-NO-STARVATION", _M, "§2.4", _X,
     "While other processes claim and release a command that is not theirs, its owner "
     "receives it within a bounded number of polls."),
    # -- prune ---------------------------------------------
    ("PRUNE-TERMINAL-ONLY", _M, "§2.5 §8 §9", _C,
     "prune() never drops a task that is not in a terminal status, however old."),
    ("PRUNE-OLDEST-FIRST", _M, "§2.5", _C,
     "prune(keep_terminal=k) drops the oldest terminal tasks by created_at, keeping the "
     "newest k, and returns how many it dropped."),
    ("PRUNE-HISTORY", _M, "§2.5 §8", _C,
     "prune() drops the history of the tasks it drops and keeps every other history."),
    ("PRUNE-COMMANDS", _S, "decision", _C,
     "prune() drops the commands of the tasks it drops, so none is claimed for a task "
     "that no longer exists."),
    ("XP-PRUNE-SAVE-RACE", _M, "§2.5 §3 §8", _X,
     "prune() racing saves that move terminal tasks back to a non-terminal status never "
     "drops a task whose save succeeded (the terminal test and the delete are one step)."),
    # -- time and round-trip -------------------------------
    ("SNAPSHOT-FULL-ROUNDTRIP", _M, "§4 §8", _C,
     "A snapshot with every field set (frozenset tags, nested Progress and Failure, "
     "unicode) survives create/get and save/get unchanged; None stays None."),
    ("TIME-UTC-ROUNDTRIP", _M, "§4 §8 §9", _C,
     "Every datetime comes back aware and at the same instant, to the microsecond, "
     "whatever UTC offset it was given with."),
    ("TIME-INSTANT-ORDER", _M, "§4 §9", _C,
     "Ordering and lease comparisons follow the instant, not the wall-clock text, when "
     "offsets differ."),
    ("COMMAND-ROUNDTRIP", _M, "§4", _C,
     "Every field of a command survives submit/claim unchanged (lease_until aside, which "
     "the claim sets)."),
    # -- close ---------------------------------------------
    ("CLOSE-IDEMPOTENT", _M, "§2.5 §8", _C,
     "close() can be called twice without error."),
    ("CLOSE-THEN-STOREERROR", _M, "§2.5 §8", _C,
     "After close(), every other method raises StoreError (not AttributeError or a "
     "driver error)."),
    ("CLOSE-RELEASES", _S, "§2.5 §8 §9", _R,
     "close() really releases connections and file handles."),
    ("ERRORS-ARE-STOREERROR", _S, "§2.5 decision", _R,
     "Driver and connection failures surface as StoreError (the driver error as "
     "__cause__) for the call in flight, never raw and never as a silent success."),
    # -- sharing -------------------------------------------
    ("XP-SHARED-VISIBILITY", _M, "§7 §8 §9", _X,
     "Instances of the store opened by different processes on one location see each "
     "other's writes at once (no private cache), and never a half-written state."),
    ("XP-MIXED-WORKLOAD", _M, "§2 §3 §7 §8", _X,
     "Under a random mix of all 14 calls from several processes, the successful saves "
     "of a task form one compare-and-set chain, no command is held twice or claimed "
     "after completion, history rows never change, acknowledged writes are visible and "
     "counts() matches the tasks."),
)

CLAUSES: dict[str, Clause] = {
    cid: Clause(cid, level, section, scope, text) for cid, level, section, scope, text in _TABLE
}
assert len(CLAUSES) == len(_TABLE), "duplicate clause id"

F = TypeVar("F", bound=Callable[..., Any])


def checks(*clause_ids: str) -> Callable[[F], F]:
    """Mark a test (or scenario) as checking ``clause_ids``.

    Raises ``KeyError`` at decoration time for an unknown ID, so a typo cannot
    produce a check that silently counts for nothing.
    """
    if not clause_ids:
        raise ValueError("checks() needs at least one clause id")
    unknown = [c for c in clause_ids if c not in CLAUSES]
    if unknown:
        raise KeyError(f"unknown clause id(s): {', '.join(unknown)}")

    def mark(func: F) -> F:
        setattr(func, CLAUSE_ATTR, tuple(clause_ids))
        return func

    return mark


def clauses_of(obj: object) -> tuple[str, ...]:
    """The clause IDs declared on a test function, method or scenario ('()' if none)."""
    func = getattr(obj, "__func__", obj)
    value = getattr(func, CLAUSE_ATTR, ())
    return tuple(value)


def by_scope(scope: Scope) -> Iterable[Clause]:
    """Clauses of one scope, in catalogue order."""
    return (c for c in CLAUSES.values() if c.scope is scope)
