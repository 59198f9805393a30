"""Stress messages quote a driver's error summarised, never cut mid-token, hint on its own line.

Issue 24's complaint: a lock-contention message was cut off in the middle of the SQL with
the kit's hint glued to its end. Here a worker call raises a StoreError wrapping a
driver-like error with a code and a long statement; the log keeps a one-line summary, the
anomaly quotes it, and the hint is a line of its own.
"""

from __future__ import annotations

from pathlib import Path

from chongming_conformance.protocol.errors import StoreError
from chongming_conformance.stress.contention import CONTENTION_HINT, LOCK_CONTENTION, error_text
from chongming_conformance.stress.harness import ERROR_CHARS, Harness, WorkerContext, WorkerSpec
from chongming_conformance.stress.log import OpLog, read_logs
from chongming_conformance.stress.scenarios._common import report_errors
from chongming_conformance.stress.stress_profiles import get_profile

SQL = (
    "UPDATE tasks SET name = %s, status = %s, status_version = %s, updated_at = %s, "
    + ", ".join(f"column_{i} = %s" for i in range(60))
    + " WHERE task_id = %s AND status_version = %s"
)


class DeadlockDetected(Exception):
    """A driver error as psycopg raises it (a SQLSTATE, the server's lines), quoting its
    statement the way SQLAlchemy does."""

    sqlstate = "40P01"


def _deadlock() -> None:
    try:
        raise DeadlockDetected(
            "deadlock detected\nDETAIL:  Process 4242 waits for ShareLock on transaction 99; "
            f"blocked by process 4343.\nHINT:  See server log for query details.\n[SQL: {SQL}]")
    except DeadlockDetected as exc:
        raise StoreError("save() failed: deadlock detected") from exc


def _logged_failure(tmp_path: Path) -> dict[str, object]:
    spec = WorkerSpec(index=0, role="saver", target=print)
    log = OpLog(tmp_path / "worker-0.jsonl", 0, "saver")
    ctx = WorkerContext(spec, store=None, log=log, barrier=None, events={},  # type: ignore[arg-type]
                        deadline=0.0)
    outcome = ctx.call("save", {"task": "t"}, _deadlock)
    assert not outcome.ok
    assert outcome.error is not None and "\n" not in outcome.error
    (op,) = read_logs({0: tmp_path / "worker-0.jsonl"}).ops[0]
    assert op.error is not None
    return op.error


def test_a_driver_error_is_logged_as_one_line_summary(tmp_path: Path) -> None:
    error = _logged_failure(tmp_path)
    summary = str(error["summary"])
    assert "\n" not in summary
    assert summary.startswith("StoreError from ")
    assert "DeadlockDetected [40P01]: deadlock detected" in summary
    assert "SQL: UPDATE tasks SET" in summary
    # The statement is cut between tokens, and says how much was left out.
    head = summary.split("SQL: ", 1)[1]
    assert "characters)" in head
    kept = head.rsplit(" … (+", 1)[0]
    assert SQL.startswith(kept) and SQL[len(kept)] in " ,"
    assert len(str(error["message"])) <= ERROR_CHARS + 40
    assert len(str(error["cause"])) <= ERROR_CHARS + 40


def test_the_contention_hint_is_a_line_of_its_own(tmp_path: Path) -> None:
    _logged_failure(tmp_path)
    ops = read_logs({0: tmp_path / "worker-0.jsonl"}).ops[0]
    h = Harness("save_race", opener=print, profile=get_profile("quick"),  # type: ignore[arg-type]
                logdir=tmp_path)
    report_errors(h, ops)
    (anomaly,) = h.anomalies
    assert anomaly.kind == LOCK_CONTENTION
    first, second = anomaly.message.split("\n")
    assert first == f"worker 0: {ops[0].describe()} raised {error_text(ops[0].error)}"
    assert second == f"  hint: {CONTENTION_HINT}"
