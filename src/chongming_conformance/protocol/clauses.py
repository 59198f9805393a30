"""The clause catalogue: every requirement a store must meet, with a stable ID.

Each clause has a level (MUST or SHOULD, as in RFC 2119), the sections of the
kit's backend guide, ``docs/backend-guide.md`` (also shipped inside the package
as ``chongming_conformance/backend-guide.md``), that explain it -- the first is
where it is explained, ``§10`` is added for a point the original guide left open
and this kit decided -- a scope, and one sentence. The project's tests check that
every cited section exists and names the clause.

Scopes say *how* a clause can be checked:

* ``contract`` -- observable through one connection; the contract suite, the
  hypothesis properties and the state machine check it.
* ``cross_process`` -- only observable with several processes sharing one
  store; the stress harness (and, for ``XP-CTRL-*``, the controller checks) checks
  it. A store that cannot be shared gets these NOT VERIFIED, never PASS.
* ``controller`` -- observable by running the reference ``Controller``
  (``chongming_conformance.controller``) on one store, the way its real
  consumer uses it; ``ControllerContract`` checks it. (Its cross-process
  counterparts are ``XP-CTRL-*`` clauses of scope ``cross_process``.)
* ``review`` -- not observable through the protocol at all (where a filter runs,
  whether a file handle is really released): NOT VERIFIED with a note, proven by the
  reference stores' own tests (``EXPLAIN``), excluded from ``--chongming-gate``.

Every check declares the clauses it covers with :func:`checks`; an unknown clause
fails at import time, and the project's tests fail if a non-review clause has no check.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "CATALOGUE_VERSION",
    "CLAUSES",
    "FAULT_MODES_NEEDED",
    "GUIDE",
    "GUIDE_SECTIONS",
    "RENAMED",
    "Clause",
    "Level",
    "Scope",
    "checks",
    "clauses_of",
    "may_blame",
    "may_blame_of",
    "unjudged_fault_clauses",
    "unrequested_fault_clauses",
]

#: Bumped whenever a clause is added, removed, or its meaning changes.
CATALOGUE_VERSION = "1.8"
#: Old id -> new id of each renamed clause (none yet: splits kept the old id), so that
#: ``chongming-conformance diff`` follows a clause across a rename (docs/attestation.md).
RENAMED: dict[str, str] = {}

CLAUSE_ATTR = "__chongming_clauses__"
MAY_BLAME_ATTR = "__chongming_may_blame__"


class Level(enum.Enum):
    """RFC 2119 strength of a clause."""

    MUST = "MUST"
    SHOULD = "SHOULD"


class Scope(enum.Enum):
    """How a clause can be checked (see module docstring)."""

    CONTRACT = "contract"
    CROSS_PROCESS = "cross_process"
    CONTROLLER = "controller"
    REVIEW = "review"


#: The guide a clause's ``section`` cites, as a path in the kit's repository.
GUIDE = "docs/backend-guide.md"

#: The guide's numbered sections: ``§N`` -> its heading's anchor (GitHub's slug).
GUIDE_SECTIONS: dict[str, str] = {
    "§1": "1-the-methods",
    "§2": "2-snapshots",
    "§3": "3-history",
    "§4": "4-the-side-path-touch",
    "§5": "5-commands",
    "§6": "6-operations",
    "§7": "7-serialisation",
    "§8": "8-sharing-between-processes",
    "§9": "9-checklist",
    "§10": "10-decisions-this-kit-made",
}


@dataclass(frozen=True, slots=True)
class Clause:
    """One requirement: ``id`` is stable across releases and safe to cite."""

    id: str
    level: Level
    #: Sections of :data:`GUIDE`, space-separated; the first explains the clause.
    section: str
    scope: Scope
    text: str

    @property
    def anchor(self) -> str:
        """The anchor of the guide section that explains this clause."""
        return GUIDE_SECTIONS[self.section.split()[0]]

    @property
    def guide_link(self) -> str:
        """``docs/backend-guide.md#<anchor>``: where a backend author reads about this clause."""
        return f"{GUIDE}#{self.anchor}"


_M, _S = Level.MUST, Level.SHOULD
_C, _X, _R = Scope.CONTRACT, Scope.CROSS_PROCESS, Scope.REVIEW
_K = Scope.CONTROLLER

_TABLE: tuple[tuple[str, Level, str, Scope, str], ...] = (
    # -- structure -----------------------------------------
    ("PROTOCOL-METHODS", _M, "§1", _C,
     "The store has all 14 TaskStore methods with the protocol's parameter names, "
     "defaults and keyword-only markers; no inheritance or registration is needed."),
    ("PROTOCOL-KEYWORD-ONLY", _S, "§1", _C,
     "Parameters the protocol makes keyword-only are declared keyword-only, not accepted "
     "positionally and not swallowed by **kwargs (a wrong call then fails loudly)."),
    # -- create / get --------------------------------------
    ("CREATE-THEN-GET", _M, "§2", _C,
     "After create(s), get(s.task_id) returns a snapshot equal to s."),
    ("CREATE-DUPLICATE-RAISES", _M, "§2", _C,
     "create() with an existing task_id raises StoreError and leaves the stored task "
     "unchanged (never a silent overwrite)."),
    ("XP-CREATE-EXCLUSIVE", _M, "§2", _X,
     "When several processes create the same task_id (or submit the same command_id) at "
     "once, exactly one succeeds, the others raise StoreError, and the stored record is "
     "the winner's."),
    ("GET-MISSING-NONE", _M, "§2", _C,
     "get() of an unknown task_id returns None and does not raise."),
    # -- save ----------------------------------------------
    ("SAVE-CAS", _M, "§2", _C,
     "save(s, expect_version=v) succeeds when the stored status_version equals v, and "
     "afterwards get() returns s (lease fields aside)."),
    ("SAVE-CONFLICT-RAISES", _M, "§2", _C,
     "save() with an expect_version below or above the stored version raises "
     "ConcurrencyConflict and changes nothing."),
    ("SAVE-CONFLICT-DETAILS", _S, "§2 §10", _C,
     "The ConcurrencyConflict carries task_id, the expected version and the stored one."),
    ("SAVE-NO-AUTO-RETRY", _M, "§2", _C,
     "A conflicting save is reported, never retried against the newer row: the other "
     "writer's snapshot stays in the store."),
    ("SAVE-VERSION-SKIP", _M, "§2", _C,
     "save() accepts a snapshot whose status_version jumps by any amount (2 -> 4); the "
     "only check is expect_version == stored version, never 'new == old + 1'."),
    ("SAVE-KEEPS-LEASE", _M, "§2", _C,
     "save() never writes lease_owner or lease_until: the lease written by create or "
     "touch survives a save whose snapshot carries another (usually None) lease."),
    ("SAVE-MISSING-RAISES", _M, "§2 §10", _C,
     "save() of a task that does not exist raises ConcurrencyConflict (actual=None) "
     "and does not create it."),
    ("XP-SAVE-ATOMIC", _M, "§2", _X,
     "When several processes save the same task at the same expect_version, exactly one "
     "succeeds and the others raise ConcurrencyConflict (check and write are one step)."),
    # -- query ---------------------------------------------
    ("QUERY-ALL", _M, "§2", _C,
     "query(), query(None) and query(TaskQuery()) return every task; an empty store "
     "returns an empty sequence."),
    ("QUERY-ORDER-CREATED", _M, "§2", _C,
     "Results are ordered by created_at ascending, or descending with newest_first."),
    ("QUERY-TIES-COMPLETE", _M, "§2 §10", _C,
     "Tasks with equal created_at are all returned; their relative order is unspecified "
     "(the kit accepts any)."),
    ("QUERY-STATUSES", _M, "§2", _C,
     "statuses returns exactly the tasks whose status is in the set."),
    ("QUERY-NAME-EXACT", _M, "§2", _C,
     "name matches by exact, case-sensitive equality."),
    ("QUERY-NAME-PREFIX-LITERAL", _M, "§2 §10", _C,
     "name_prefix is a literal, case-sensitive prefix: '%', '_' and '\\' match only "
     "themselves."),
    ("QUERY-TAG-EXACT", _M, "§2", _C,
     "tag matches tasks having exactly that tag ('io' matches neither 'ios' nor 'bio'), "
     "case-sensitively, including tags with quotes, commas and brackets."),
    ("QUERY-BUCKETS", _M, "§2", _C,
     "buckets returns exactly the tasks whose bucket is in the set; a task without a "
     "bucket never matches."),
    ("QUERY-PIPELINE", _M, "§2", _C,
     "pipeline_run_id returns exactly the tasks of that pipeline run."),
    ("QUERY-LIMIT", _M, "§2 §10", _C,
     "limit=N (N >= 1) returns the first N matching tasks in the requested order; limit=0, "
     "which the controller never passes, returns no task or is refused with StoreError or "
     "ValueError (the kit accepts both)."),
    ("QUERY-FILTERS-COMBINE", _M, "§2", _C,
     "All given filters apply together (AND)."),
    ("QUERY-EMPTY-SET-MATCHES-NOTHING", _M, "§2 §10", _C,
     "An empty statuses or buckets collection is a filter that matches nothing, "
     "not 'no filter' (None is 'no filter')."),
    ("QUERY-PUSHDOWN", _S, "§2", _R,
     "Filters, above all buckets, are evaluated by the backend (index), not by fetching "
     "every row and filtering in Python."),
    # -- counts --------------------------------------------
    ("COUNTS-PER-STATUS", _M, "§2", _C,
     "counts() maps each status to the number of tasks in it."),
    ("COUNTS-ALL-KEYS", _M, "§2 §10", _C,
     "counts() has a key for every TaskStatus, with 0 where there are no tasks."),
    ("COUNTS-AGGREGATED", _S, "§2", _R,
     "counts() is aggregated by the backend where it can (GROUP BY in SQL; a key-value "
     "store keeps counts or index sizes), not by reading every record."),
    # -- history -------------------------------------------
    ("APPEND-IDEMPOTENT", _M, "§3", _C,
     "Appending a transition whose (task_id, version) exists leaves exactly one row."),
    ("APPEND-FIRST-WINS", _S, "§3 §10", _C,
     "A replayed append with different content keeps the first row (DO NOTHING, not "
     "upsert)."),
    ("HISTORY-ORDERED", _M, "§3", _C,
     "history() returns transitions ascending by version, whatever the append order."),
    ("HISTORY-SINCE", _M, "§3", _C,
     "history(since_version=v) returns exactly the transitions with version > v."),
    ("HISTORY-PER-TASK", _M, "§3", _C,
     "history(t) returns only task t's transitions."),
    ("HISTORY-UNKNOWN-EMPTY", _M, "§3 §10", _C,
     "history() of a task with no transitions returns an empty sequence."),
    ("TRANSITION-ROUNDTRIP", _M, "§3", _C,
     "Every field of a transition survives append/history unchanged."),
    ("XP-APPEND-REPLAY", _M, "§3", _X,
     "Processes appending the same transitions concurrently leave exactly one row per "
     "(task_id, version)."),
    # -- touch ---------------------------------------------
    ("TOUCH-NO-VERSION", _M, "§4", _C,
     "touch() never checks or changes status_version; a save with the pre-touch version "
     "still succeeds."),
    ("TOUCH-ONLY-NAMED-FIELDS", _M, "§4", _C,
     "touch() changes exactly the fields passed as non-None; each argument is "
     "independently optional; with all None nothing changes."),
    ("TOUCH-MISSING-IGNORED", _M, "§4", _C,
     "touch() of an unknown task_id does nothing and does not raise."),
    ("TOUCH-LEASE", _M, "§4", _C,
     "touch() stores lease_owner and lease_until as given, and get() returns them."),
    ("TOUCH-SIGNALS-SEPARATE", _M, "§4", _C,
     "heartbeat_at and the lease are stored verbatim and independently: writing one "
     "never derives or moves the other."),
    ("XP-TOUCH-SAVE", _M, "§4", _X,
     "With one process touching at high rate and another saving, no save conflicts "
     "because of a touch, the lease is never clobbered, and only saves move the version."),
    ("XP-SAVE-KEEPS-LEASE", _M, "§2", _X,
     "While one process renews a task's lease with touch and another keeps saving the "
     "task, the lease read after both stop is the renewer's latest (no save carries an "
     "older lease back)."),
    ("XP-TOUCH-VISIBLE", _M, "§4", _X,
     "A touch is committed when it returns: another process reads its progress, "
     "heartbeat and lease at once, even if the toucher writes nothing else."),
    # -- commands ------------------------------------------
    ("SUBMIT-THEN-CLAIM", _M, "§5", _C,
     "A submitted command is returned by claim_commands with its fields intact, "
     "lease_until = now + lease_seconds and finished_at None."),
    ("SUBMIT-DUPLICATE-RAISES", _M, "§5 §10", _C,
     "submit_command() with an existing command_id raises StoreError and leaves the "
     "stored command unchanged."),
    ("CLAIM-LEASE-EXCLUSIVE", _M, "§5", _C,
     "A command whose lease has not expired is not returned by another claim."),
    ("CLAIM-LEASE-BOUNDARY", _S, "§5 §10", _C,
     "A lease covers [claim time, lease_until): the command is claimable again at "
     "now == lease_until (a SHOULD: the original guide does not fix the instant, and every "
     "MUST check accepts a lease still held at lease_until)."),
    ("CLAIM-LEASE-PRECISE", _M, "§5", _C,
     "A claim's lease lasts lease_seconds to the microsecond, fractions included: a 1.5 s "
     "lease is held until now + 1.5 s, not 1 s or 2 s (no whole-second TTL, no interval "
     "rounding)."),
    ("CLAIM-EXPIRED-RECLAIM", _M, "§5", _C,
     "After its lease expires an unfinished command is claimable again."),
    ("CLAIM-ORDER", _M, "§5", _C,
     "claim_commands() takes commands in created_at order (by instant)."),
    ("CLAIM-LIMIT", _M, "§5 §10", _C,
     "claim_commands() returns at most limit commands and leases only those; limit=0, which "
     "the controller never passes, leases nothing, answering an empty sequence or refusing "
     "with StoreError or ValueError (the kit accepts both)."),
    ("XP-CLAIM-EXCLUSIVE", _M, "§5", _X,
     "Consumers in several processes never hold the same command at the same instant, "
     "none is lost, none is completed twice."),
    ("XP-CLAIM-CRASH-RECOVERY", _M, "§5", _X,
     "A command held by a SIGKILLed process is not claimable before its lease_until, is "
     "claimable once that instant has passed, and the store is intact."),
    ("COMPLETE-NEVER-RECLAIMED", _M, "§5", _C,
     "A completed command (claimed or not) is never claimed again, even after its lease "
     "would have expired."),
    ("COMPLETE-IDEMPOTENT", _M, "§5 §10", _C,
     "complete_command() of an already completed command does not raise and changes nothing "
     "(the controller completes again after a reply it lost); of a command_id never "
     "submitted it changes nothing, returning or raising StoreError (the kit accepts both)."),
    ("RELEASE-NOT-COMPLETE", _M, "§5", _C,
     "release_command() clears the lease without finishing: the command is claimable "
     "again at once."),
    ("RELEASE-FINISHED-NOOP", _M, "§5 §10", _C,
     "release_command() of a completed command does not raise and does not make it "
     "claimable; of a command_id never submitted it changes nothing, returning or raising "
     "StoreError (the kit accepts both)."),
    ("XP-RELEASE-NO-STARVATION", _M, "§5", _X,
     "While other processes claim and release a command that is not theirs, its owner "
     "receives it within a bounded number of polls."),
    # -- prune ---------------------------------------------
    ("PRUNE-TERMINAL-ONLY", _M, "§6", _C,
     "prune() never drops a task that is not in a terminal status, however old."),
    ("PRUNE-OLDEST-FIRST", _M, "§6", _C,
     "prune(keep_terminal=k) drops the oldest terminal tasks by created_at, keeping the "
     "newest k, and returns how many it dropped."),
    ("PRUNE-HISTORY", _M, "§6", _C,
     "prune() drops the history of the tasks it drops and keeps every other history."),
    ("PRUNE-COMMANDS", _S, "§6 §10", _C,
     "prune() drops the commands of the tasks it drops, so none is claimed for a task "
     "that no longer exists."),
    ("PRUNE-LARGE", _S, "§6", _C,
     "One prune() drops 100,000 terminal tasks and keeps every non-terminal one (no bound "
     "on bind parameters or statement size); checked under the thorough profile."),
    ("XP-PRUNE-SAVE-RACE", _M, "§6", _X,
     "prune() racing saves that move terminal tasks back to a non-terminal status never "
     "drops a task whose save succeeded (the terminal test and the delete are one step), "
     "and racing touches of terminal tasks still drops every one of them (a touch never "
     "changes the status, so it never takes a task out of prune's reach)."),
    # -- time and round-trip -------------------------------
    ("SNAPSHOT-FULL-ROUNDTRIP", _M, "§7", _C,
     "A snapshot with every field set (frozenset tags, nested Progress and Failure, "
     "unicode) survives create/get and save/get unchanged; None stays None."),
    ("TIME-UTC-ROUNDTRIP", _M, "§7", _C,
     "Every datetime comes back aware and at the same instant, to the microsecond, "
     "whatever UTC offset it was given with."),
    ("TIME-INSTANT-ORDER", _M, "§7", _C,
     "Ordering and lease comparisons follow the instant, not the wall-clock text, when "
     "offsets differ."),
    ("LENGTH-IDS", _M, "§7 §10", _C,
     "task_id, command_id, pipeline_run_id, every tag, lease_owner and issued_by are never "
     "truncated or corrupted: one of up to 255 characters (4-byte ones included) is stored, "
     "returned and matched exactly, or refused with StoreError leaving nothing behind; the "
     "controller's 32-character task and command ids are stored."),
    ("LENGTH-IDS-CAPACITY", _S, "§7 §10", _C,
     "task_id, command_id, pipeline_run_id, every tag, lease_owner and issued_by of up to 255 "
     "characters (4-byte ones included) are accepted, not refused (a SHOULD: the original "
     "guide names no length)."),
    ("LENGTH-TEXT", _M, "§7 §10", _C,
     "A name and free text (progress message, failure type, message and detail, transition "
     "reason, command outcome) are never truncated or corrupted: stored and returned exactly, "
     "or refused with StoreError leaving nothing behind; the text the controller writes "
     "itself (failure type, message and detail, transition reason) of up to 8,192 characters, "
     "4-byte ones included, is taken."),
    ("LENGTH-TEXT-CAPACITY", _S, "§7 §10", _C,
     "A name of up to 1,024 characters and free text of up to 8,192, 4-byte ones included, "
     "are accepted, not refused (a SHOULD: the original guide names no length)."),
    ("COMMAND-ROUNDTRIP", _M, "§5", _C,
     "Every field of a command survives submit/claim unchanged (lease_until aside, which "
     "the claim sets)."),
    # -- close ---------------------------------------------
    ("CLOSE-IDEMPOTENT", _M, "§6", _C,
     "close() can be called twice without error."),
    ("CLOSE-THEN-STOREERROR", _M, "§6", _C,
     "After close(), every other method raises StoreError (not AttributeError or a "
     "driver error)."),
    ("XP-CLOSE-ISOLATED", _M, "§6", _X,
     "Closing one instance leaves every other instance working, including instances opened "
     "on the same shared location (a pool or connection they share stays open)."),
    ("CLOSE-RELEASES", _S, "§6", _R,
     "close() really releases connections and file handles."),
    ("ERRORS-ARE-STOREERROR", _S, "§6", _R,
     "Driver and connection failures surface as StoreError (the driver error as "
     "__cause__) for the call in flight, never raw and never as a silent success."),
    # -- sharing -------------------------------------------
    ("XP-SHARED-VISIBILITY", _M, "§8", _X,
     "Instances of the store opened by different processes on one location see each "
     "other's writes at once (no private cache), and never a half-written state."),
    # -- the controller in the loop (chongming_conformance.controller) -------------
    ("CTRL-PLUGS-IN", _M, "§8", _K,
     "A Controller on the store runs a task to SUCCEEDED: the stored snapshot is its final "
     "state, history() equals the transitions it applied, and list_tasks, stats, "
     "bucket_counts and tasks_in_buckets agree with what was submitted."),
    ("CTRL-OUTAGE-RECOVERY", _M, "§8", _K,
     "When the store fails mid-task the task still finishes; after recovery the store holds "
     "the final state at a version that jumped past the buffered ones, and history is "
     "complete without duplicates, even when an append whose reply was lost is sent again."),
    ("CTRL-RESTART-RECOVERY", _M, "§8", _K,
     "reconcile() marks LOST a task whose supervisor lease expired and spares a task whose "
     "lease a live controller holds although its heartbeat is stale."),
    ("CTRL-READ-ONLY-NO-CLAIM", _M, "§8", _K,
     "A controller that never submitted a task claims no command, so a stop request stays "
     "for the task's holder."),
    ("CTRL-STOP-REACHES-HOLDER", _M, "§8", _K,
     "A STOP claimed first by a controller that does not hold the task is released, not "
     "finished; its holder then stops the task (CANCELLED) and completes the command "
     "'stopped'."),
    ("CTRL-STOP-DELIVERED-ONCE", _M, "§8", _K,
     "While the holder's claim on a STOP is unexpired no poll hands the command out again, "
     "so one stop request is carried out once."),
    ("XP-CTRL-STOP", _M, "§8", _X,
     "A Controller in one process stops a task a Controller in another process runs: the "
     "holder claims the command, stops the task and completes the command 'stopped', and "
     "the stopper sees CANCELLED."),
    ("XP-CTRL-NO-STARVATION", _M, "§8", _X,
     "A controller in another process that polls but holds nothing releases the stop request "
     "every time it claims it, and the holder still receives it within two of its polls."),
    ("XP-CTRL-KILLED-HOLDER", _M, "§8", _X,
     "When a controller process is SIGKILLed while running a task and holding its STOP "
     "command, reconcile() in a new process marks the task LOST once the lease has expired, "
     "and the STOP command is claimable again."),
    ("XP-MIXED-WORKLOAD", _M, "§8", _X,
     "Under a random mix of all 14 calls from several processes, some killed mid-call, "
     "the recorded history is linearizable: each call can be given one instant inside "
     "its interval so that, run in that order on the sequential model, every call gives "
     "the answer the store gave (a claim skipping only rows a concurrent call may hold "
     "locked), and no call raises what the guide does not allow there."),
    # -- under faults (the nemesis of --chongming-faults; docs/faults.md) --------------------
    ("XP-FAULT-SAFETY", _M, "§8 §6", _X,
     "Under injected faults (connections reset, blackholed, slowed or cut mid-reply, worker "
     "processes paused and killed) the recorded history is still linearizable with every "
     "call that raised taken as an unknown effect: no acknowledged write is lost, a call "
     "that answered 'no effect' (ConcurrencyConflict) had none, no command is held twice."),
    ("XP-FAULT-RECOVERY", _M, "§8 §6", _X,
     "After the network heals, every worker's calls succeed again within the recovery "
     "bound: the store replaces a broken connection instead of keeping it."),
    ("XP-FAULT-NO-HANG", _M, "§8 §6 §10", _X,
     "A call made while the server does not answer (a blackholed connection) ends -- "
     "returns or raises StoreError -- within the no-hang bound instead of waiting for ever."),
    ("XP-FAULT-DURABILITY", _M, "§8", _X,
     "Every write the store acknowledged before a server crash is there after the server "
     "restarts: the Controller writes each transition through and a recovered Controller "
     "rebuilds from what it was told was stored (judged with the deployment's crash "
     "actions, --chongming-faults=deployment)."),
)

CLAUSES: dict[str, Clause] = {
    cid: Clause(cid, level, section, scope, text) for cid, level, section, scope, text in _TABLE
}
assert len(CLAUSES) == len(_TABLE), "duplicate clause id"

#: Cross-process clause -> the clauses its scenario relies on: single-process ones, and
#: XP-SHARED-VISIBILITY for every other scenario (each judges by reading what other
#: processes wrote; a private cache fails them all). A store that already breaks one of
#: them fails the scenario for that reason; the report then shows the cross-process clause
#: NOT VERIFIED (a knock-on, naming the clause that FAILs) instead of a second FAIL for
#: one mistake. Fix that clause first; the next run judges the scenario on its own.
PREREQUISITES: dict[str, frozenset[str]] = {
    cid: frozenset(needs.split())
    for cid, needs in {
        "XP-CREATE-EXCLUSIVE": "CREATE-THEN-GET CREATE-DUPLICATE-RAISES SUBMIT-DUPLICATE-RAISES",
        "XP-SAVE-ATOMIC": "CREATE-THEN-GET SAVE-CAS SAVE-CONFLICT-RAISES SAVE-NO-AUTO-RETRY",
        "XP-APPEND-REPLAY": "APPEND-IDEMPOTENT",
        "XP-TOUCH-SAVE": "TOUCH-NO-VERSION TOUCH-LEASE SAVE-KEEPS-LEASE",
        "XP-SAVE-KEEPS-LEASE": "TOUCH-LEASE SAVE-KEEPS-LEASE",
        "XP-TOUCH-VISIBLE": (
            "TOUCH-NO-VERSION TOUCH-LEASE TOUCH-ONLY-NAMED-FIELDS XP-SHARED-VISIBILITY"
        ),
        "XP-CLAIM-EXCLUSIVE": "SUBMIT-THEN-CLAIM CLAIM-LEASE-EXCLUSIVE COMPLETE-NEVER-RECLAIMED",
        "XP-CLAIM-CRASH-RECOVERY": (
            "SUBMIT-THEN-CLAIM CLAIM-LEASE-EXCLUSIVE CLAIM-EXPIRED-RECLAIM XP-SHARED-VISIBILITY"
        ),
        "XP-RELEASE-NO-STARVATION": (
            "CLAIM-LEASE-EXCLUSIVE CLAIM-ORDER RELEASE-NOT-COMPLETE XP-SHARED-VISIBILITY"
        ),
        "XP-PRUNE-SAVE-RACE": "SAVE-CAS PRUNE-TERMINAL-ONLY PRUNE-OLDEST-FIRST XP-SAVE-ATOMIC",
        "XP-CLOSE-ISOLATED": "CREATE-THEN-GET CLOSE-IDEMPOTENT",
        "XP-SHARED-VISIBILITY": (
            "CREATE-THEN-GET SAVE-CAS TOUCH-NO-VERSION TOUCH-ONLY-NAMED-FIELDS "
            "APPEND-IDEMPOTENT HISTORY-ORDERED"
        ),
        "XP-CTRL-STOP": "CTRL-PLUGS-IN CTRL-STOP-REACHES-HOLDER XP-SHARED-VISIBILITY",
        "XP-CTRL-NO-STARVATION": "CTRL-STOP-REACHES-HOLDER XP-SHARED-VISIBILITY",
        "XP-CTRL-KILLED-HOLDER": (
            "CLAIM-EXPIRED-RECLAIM CTRL-RESTART-RECOVERY XP-SHARED-VISIBILITY"
        ),
        "XP-MIXED-WORKLOAD": (
            "CREATE-THEN-GET SAVE-CAS SAVE-CONFLICT-RAISES CLAIM-LEASE-EXCLUSIVE "
            "COMPLETE-NEVER-RECLAIMED APPEND-IDEMPOTENT TOUCH-NO-VERSION "
            "COUNTS-PER-STATUS XP-SHARED-VISIBILITY"
        ),
        # The fault run is the mixed workload with a nemesis: a store that already fails
        # it without faults fails it with them too, for that reason.
        "XP-FAULT-SAFETY": "XP-MIXED-WORKLOAD",
        "XP-FAULT-RECOVERY": "XP-MIXED-WORKLOAD",
        "XP-FAULT-DURABILITY": "XP-MIXED-WORKLOAD",
    }.items()
}


def _closed(direct: dict[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    """Prerequisites of prerequisites count too: XP-MIXED-WORKLOAD relies on
    XP-SHARED-VISIBILITY, which relies on CREATE-THEN-GET."""
    closed = dict(direct)
    changed = True
    while changed:
        changed = False
        for cid, needs in closed.items():
            wider = needs.union(*(closed.get(n, frozenset()) for n in needs)) - {cid}
            if wider != needs:
                closed[cid], changed = wider, True
    return closed


# Every scenario judges by reading what other processes wrote: all of them rely on it.
PREREQUISITES = _closed({
    cid: needs | ({"XP-SHARED-VISIBILITY"} if cid != "XP-SHARED-VISIBILITY" else set())
    for cid, needs in PREREQUISITES.items()
})
assert all(
    cid in CLAUSES and CLAUSES[cid].scope is Scope.CROSS_PROCESS and needs <= CLAUSES.keys()
    for cid, needs in PREREQUISITES.items()
), "PREREQUISITES names an unknown clause"
# A SHOULD is never a prerequisite of a MUST: a store that does not follow it would turn
# the MUST clause's own failure into a knock-on.
assert all(
    CLAUSES[need].level is Level.MUST
    for cid, needs in PREREQUISITES.items() if CLAUSES[cid].level is Level.MUST for need in needs
), "a MUST clause relies on a SHOULD in PREREQUISITES"

#: Clauses only a fault run judges, and the least ``--chongming-faults`` mode that judges
#: each (none < pause < network): asked for less, they are NOT VERIFIED and left out of
#: the gate -- a run that injected no fault proves nothing about them, and every other
#: clause's verdict stands without them (docs/faults.md).
FAULT_MODES_NEEDED: dict[str, str] = {
    "XP-FAULT-SAFETY": "pause",
    "XP-FAULT-RECOVERY": "network",
    "XP-FAULT-NO-HANG": "network",
    "XP-FAULT-DURABILITY": "deployment",
}
_FAULT_ORDER = ("none", "pause", "network", "deployment")


def unrequested_fault_clauses(mode: str) -> dict[str, str]:
    """Clause id -> why it is left out of the gate, for the fault clauses ``mode`` (a
    ``--chongming-faults`` value) does not judge."""
    have = _FAULT_ORDER.index(mode) if mode in _FAULT_ORDER else 0
    return {
        cid: f"left out of the gate: {need} faults not requested "
             f"(--chongming-faults={mode}; run with --chongming-faults={need} to judge it)"
        for cid, need in FAULT_MODES_NEEDED.items() if _FAULT_ORDER.index(need) > have
    }


def unjudged_fault_clauses(mode: str, *, crash_offered: bool) -> dict[str, str]:
    """Clause id -> why this run cannot judge it although its faults were requested: a
    deployment run whose store offers no crash action has nothing to judge durability
    across. NOT VERIFIED, and gated: deployment faults were asked for."""
    if mode != "deployment" or crash_offered:
        return {}
    return {"XP-FAULT-DURABILITY": (
        "not judged: --chongming-faults=deployment was requested, but the store's module "
        "offers no crash action (chongming_deployment() returning a Deployment with an "
        "Action(crash=True), docs/faults.md): no server crash ran")}


F = TypeVar("F", bound=Callable[..., Any])


def _marker(attr: str, clause_ids: tuple[str, ...]) -> Callable[[F], F]:
    unknown = [c for c in clause_ids if c not in CLAUSES]
    if unknown:
        raise KeyError(f"unknown clause id(s): {', '.join(unknown)}")

    def mark(func: F) -> F:
        setattr(func, attr, tuple(clause_ids))
        return func

    return mark


def checks(*clause_ids: str) -> Callable[[F], F]:
    """Mark a test (or scenario) as checking ``clause_ids``.

    Raises ``KeyError`` at decoration time for an unknown ID, so a typo cannot
    produce a check that silently counts for nothing.
    """
    if not clause_ids:
        raise ValueError("checks() needs at least one clause id")
    return _marker(CLAUSE_ATTR, clause_ids)


def may_blame(*clause_ids: str) -> Callable[[F], F]:
    """Mark a test as able to *find* a failure of ``clause_ids`` without checking them: a
    failure blamed on one FAILs it (the clauses the test declares are then a knock-on);
    nothing else the test does (pass, skip, a failure blamed elsewhere) counts for or
    against it. The stress scenarios carry it for their after-scenario integrity check
    (``stress.runner.INTEGRITY_CLAUSES``); ``report/outcomes.py`` has the decision."""
    return _marker(MAY_BLAME_ATTR, clause_ids)


def may_blame_of(obj: object) -> tuple[str, ...]:
    """The clauses a test may blame (:func:`may_blame`), less those it declares."""
    own = set(clauses_of(obj))
    return tuple(c for c in getattr(getattr(obj, "__func__", obj), MAY_BLAME_ATTR, ())
                 if c not in own)


def clauses_of(obj: object) -> tuple[str, ...]:
    """The clause IDs declared on a test function, method or scenario ('()' if none)."""
    func = getattr(obj, "__func__", obj)
    value = getattr(func, CLAUSE_ATTR, ())
    return tuple(value)


def by_scope(scope: Scope) -> Iterable[Clause]:
    """Clauses of one scope, in catalogue order."""
    return (c for c in CLAUSES.values() if c.scope is scope)
