"""The timeline (``stress.timeline``) and the full-call recording it reads (``stress.calls``)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from chongming_conformance.protocol.model import (
    Command,
    CommandKind,
    Failure,
    Progress,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from chongming_conformance.stress.__main__ import main as stress_main
from chongming_conformance.stress.calls import decode_value, encode_value, recorded_call
from chongming_conformance.stress.harness import WorkerContext, WorkerSpec
from chongming_conformance.stress.log import Logs, OpLog, read_log_dir, read_logs
from chongming_conformance.stress.records import at, command, task, transition
from chongming_conformance.stress.timeline import (
    entries_from_logs,
    format_value,
    render,
    select,
    slice_around,
)
from reference_stores.memory import InMemoryTaskStore

# -- recording ------------------------------------------------------------------------------

FULL = TaskSnapshot(
    task_id="t-ü", name="build ", status=TaskStatus.FAILED, status_version=7,
    created_at=at(1.5), updated_at=at(2), started_at=at(1.75), finished_at=at(3),
    tags=frozenset({"io", "a,"}), bucket=0, pipeline_run_id="p",
    progress=Progress(done=3, total=9, message="m"),
    failure=Failure("E", "boom", "trace"), heartbeat_at=at(2.5), lease_owner="w1",
    lease_until=at(100))


@pytest.mark.parametrize("value", [
    None, 3, 2.5, "x", True, FULL, task("t"), transition("t", 3, reason="r"),
    command("c", "t", 0.25), Progress(done=1), TaskQuery(), at(12),
    TaskQuery(statuses=frozenset({TaskStatus.RUNNING}), buckets=frozenset({0, 3}), limit=2,
              newest_first=True, name_prefix="%_"),
    {TaskStatus.PENDING: 2, TaskStatus.LOST: 0}, [FULL, None], [command("c", "t", 1)],
])
def test_every_value_a_store_call_takes_or_returns_round_trips(value: Any) -> None:
    encoded = encode_value(value)
    json.dumps(encoded)  # plain JSON
    decoded = decode_value(json.loads(json.dumps(encoded)))
    assert decoded == (list(value) if isinstance(value, tuple) else value)


def test_a_recorded_call_binds_the_protocol_signature_with_defaults() -> None:
    store = InMemoryTaskStore()
    snap = task("t")
    assert recorded_call(functools.partial(store.save, snap, expect_version=3)) == {
        "method": "save", "args": {"snapshot": encode_value(snap), "expect_version": 3}}
    assert recorded_call(functools.partial(store.history, "t"))["args"] == {
        "task_id": "t", "since_version": 0}
    assert recorded_call(store.counts) == {"method": "counts", "args": {}}
    claim = recorded_call(functools.partial(functools.partial(store.claim_commands, now=at(1)),
                                            lease_seconds=2.0))
    assert claim["args"] == {"now": encode_value(at(1)), "lease_seconds": 2.0, "limit": 50}


def test_recording_refuses_what_is_not_a_store_call() -> None:
    with pytest.raises(TypeError, match="record=True needs"):
        recorded_call(lambda: None)
    with pytest.raises(TypeError, match="record=True needs"):
        recorded_call(functools.partial(print, "x"))


def _context(tmp_path: Path, worker: int = 0) -> WorkerContext:
    log = OpLog(tmp_path / f"worker{worker}-r.jsonl", worker, "r")
    return WorkerContext(WorkerSpec(worker, "r", print), InMemoryTaskStore(), log, None, {},
                         1e18)


def test_worker_context_logs_the_full_call_only_when_asked(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    snap = task("t")
    ctx.call("create", {"task": "t"}, functools.partial(ctx.store.create, snap))
    ctx.call("get", {"task": "t"}, functools.partial(ctx.store.get, "t"), record=True,
             summarize=lambda s: "summary")
    ctx.record_calls = True
    ctx.call("create", {"task": "t"}, functools.partial(ctx.store.create, snap))  # duplicate
    ctx.log.close()
    lines = [json.loads(x) for x in (tmp_path / "worker0-r.jsonl").read_text().splitlines()]
    inv = [x for x in lines if x["ev"] == "inv"]
    ret = [x for x in lines if x["ev"] == "ret"]
    assert "call" not in inv[0] and "result" not in ret[0]  # the old format, unchanged
    assert inv[1]["call"] == {"method": "get", "args": {"task_id": "t"}}
    assert ret[1]["value"] == "summary" and decode_value(ret[1]["result"]) == snap
    assert inv[2]["call"]["method"] == "create" and "result" not in ret[2]
    assert ret[2]["error"]["store_error"] is True
    ops = read_logs({0: tmp_path / "worker0-r.jsonl"}).ops[0]
    assert ops[1].has_result and not ops[0].has_result and ops[0].call is None
    assert all(o.t_return is not None and o.t_return >= o.t_invoke for o in ops)


# -- the timeline ---------------------------------------------------------------------------

def _run(tmp_path: Path) -> Path:
    """Two workers' logs of a few recorded calls, one left pending, in a kept-run layout."""
    folder = tmp_path / "run" / "group1"
    folder.mkdir(parents=True)
    a = _context(folder, 0)
    b = _context(folder, 1)
    b.store = a.store
    a.record_calls = b.record_calls = True
    a.call("create", {"task": "t1"}, functools.partial(a.store.create, task("t1")))
    b.call("submit", {"id": "c1"}, functools.partial(b.store.submit_command,
                                                      command("c1", "t1", 0)))
    b.call("claim", {}, functools.partial(b.store.claim_commands, now=at(0), lease_seconds=2,
                                          limit=5), now=at(0))
    a.call("save", {"task": "t1"}, functools.partial(a.store.save, task("t1", version=1),
                                                     expect_version=5))  # conflict
    a.call("get", {"task": "t2"}, functools.partial(a.store.get, "t2"))
    b.log.invoke("complete", {"id": "c1"}, round_=None, now=None,
                 call=recorded_call(functools.partial(b.store.complete_command, "c1",
                                                      now=at(1))))  # never returns
    a.log.close()
    b.log.close()
    return tmp_path / "run"


def test_the_timeline_merges_every_worker_in_time_order(tmp_path: Path) -> None:
    groups = read_log_dir(_run(tmp_path))
    assert [prefix for prefix, _ in groups] == [""]
    entries = entries_from_logs(groups)
    assert [e.t_invoke for e in entries] == sorted(e.t_invoke for e in entries)
    assert [(e.worker, e.call.split("(")[0]) for e in entries] == [
        ("w0", "create"), ("w1", "submit_command"), ("w1", "claim_commands"), ("w0", "save"),
        ("w0", "get"), ("w1", "complete_command")]
    text = render(entries, entries[0].t_invoke)
    lines = text.splitlines()
    assert lines[0].split()[0] == "+0.0000s"
    assert "claim_commands(now=t+0s, lease_seconds=2, limit=5) → ok [Cmd(c1 task=t1" in text
    assert "ConcurrencyConflict (actual 0)" in lines[3]
    assert "get('t2') → ok None" in lines[4]
    assert lines[5].split()[1] == "pending" and lines[5].endswith("→ pending")


def test_filters_by_task_command_and_window(tmp_path: Path) -> None:
    entries = entries_from_logs(read_log_dir(_run(tmp_path)))
    assert [e.call.split("(")[0] for e in select(entries, command="c1")] == [
        "submit_command", "claim_commands", "complete_command"]
    assert [e.call.split("(")[0] for e in select(entries, task="t2")] == ["get"]
    assert len(select(entries, task="t1")) == 4  # create, submit, claim (result), save
    third = entries[2]
    window = select(entries, start=third.t_invoke, end=third.t_return)
    assert third in window and entries[0] not in window
    assert entries[-1] in select(entries, start=1e12)  # pending: open to the end


def test_the_command_prints_the_timeline_and_the_old_form_still_works(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logdir = _run(tmp_path)
    assert stress_main(["timeline", str(logdir), "--command", "c1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and "submit_command(Cmd(c1" in out[0]
    assert stress_main(["timeline", str(logdir), "--around", "0", "--window", "0"]) == 0
    assert "create(Task(t1" in capsys.readouterr().out
    assert stress_main(["timeline", str(logdir), "--task", "nope"]) == 1
    assert stress_main(["timeline", str(tmp_path / "missing")]) == 4
    with pytest.raises(SystemExit) as exc:
        stress_main(["--help"])
    assert exc.value.code == 0 and "MODULE:ATTR" in capsys.readouterr().out


def test_several_groups_are_merged_with_their_prefix(tmp_path: Path) -> None:
    for g in (1, 2):
        folder = tmp_path / f"group{g}"
        folder.mkdir()
        ctx = _context(folder, 0)
        ctx.call("get", {"task": "t"}, functools.partial(ctx.store.get, "t"), record=True)
        ctx.log.close()
    groups = read_log_dir(tmp_path)
    assert [p for p, _ in groups] == ["g1.", "g2."]
    assert [e.worker for e in entries_from_logs(groups)] == ["g1.w0", "g2.w0"]


def test_slice_around_marks_the_ops_and_shows_every_worker_near_them(tmp_path: Path) -> None:
    logs = read_log_dir(_run(tmp_path))[0][1]
    claim = next(o for o in logs.all_ops() if o.op == "claim")
    text = slice_around(logs, [claim], 0.0)
    marked = [line for line in text.splitlines() if line.lstrip().startswith("»")]
    assert len(marked) == 1 and "claim_commands" in marked[0]
    wide = slice_around(logs, [claim], 60.0)
    assert len(wide.splitlines()) == 6  # everything, both workers


def test_long_values_are_elided_between_items_never_inside_one() -> None:
    many = [task(f"task-number-{i}") for i in range(200)]
    text = format_value(many)
    assert text.endswith(" more]") and "…" in text
    shown = text[1:-1].split(", ")
    assert all(part.startswith(("Task(", "… +")) for part in shown)
    assert all(part.endswith(")") for part in shown[:-1])  # whole items only
    long_name = "word " * 40
    cut = format_value(long_name)
    assert cut.startswith("'word word") and cut.endswith(" chars)")
    kept = cut.split("'")[1]
    assert long_name.startswith(kept) and kept.endswith(" ")  # at a word boundary
    assert format_value("x" * 50) == repr("x" * 50)  # eliding 2 characters saves nothing
    assert format_value({TaskStatus.PENDING: 2, TaskStatus.LOST: 0}) == "{pending: 2}"


def test_unrecorded_calls_show_their_summary(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    ctx.call("get", {"task": "t"}, functools.partial(ctx.store.get, "t"),
             summarize=lambda s: {"v": None})
    ctx.log.close()
    logs: Logs = read_logs({0: tmp_path / "worker0-r.jsonl"})
    (entry,) = entries_from_logs(logs)
    assert entry.call == "get(task='t')" and entry.result == "{v: None}"
    assert entry.tasks == {"t"}


def test_a_query_argument_and_commands_render_compactly() -> None:
    q = TaskQuery(statuses=frozenset({TaskStatus.RUNNING}), limit=3)
    assert format_value(q) == "TaskQuery(statuses=['running'], limit=3)"
    cmd = Command("c", "t", CommandKind.STOP, "me", at(1), lease_until=at(3), finished_at=at(2),
                  outcome="ok")
    assert format_value(cmd) == "Cmd(c task=t created t+1s lease→t+3s done t+2s 'ok')"
    tr = Transition("t", 2, None, TaskStatus.RUNNING, at(2), reason=None)
    assert format_value(tr) == "Tr(t v2 ∅→running None)"
