"""The scale probe (``chongming_conformance.commands.bench``).

Wall-clock growth is noisy, so nothing here asserts a timing. The growth
computation is pinned with an injected clock that counts rows read instead of
nanoseconds: a store that fetches every row and filters in Python then shows
exactly ×100 from 50 to 5,000 tasks on the calls that read every row, and ×1
on the ones that do not. The real-clock runs assert the shape of the output.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_conformance import TaskQuery, TaskSnapshot, TaskStatus
from chongming_conformance.commands.bench import (
    HotCall,
    format_table,
    hot_calls,
    main,
    resolve_factory,
    run_probe,
)
from chongming_conformance.strategies.samples import T0
from reference_stores.memory import InMemoryTaskStore, make_store

LABELS = [call.label for call in hot_calls()]


class FetchThenFilterStore(InMemoryTaskStore):
    """Answers correctly, but ``query`` and ``counts`` read every task to do it.

    ``rows_read`` is the work done; the test's clock returns it, so a "µs" in
    the probe's result is one row read -- an exact, noise-free cost model.
    """

    def __init__(self) -> None:
        super().__init__()
        self.rows_read = 0

    def _read_everything(self) -> None:
        self.rows_read += len(super().query(None))

    def get(self, task_id: str) -> TaskSnapshot | None:
        self.rows_read += 1  # a keyed lookup: one row
        return super().get(task_id)

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        self._read_everything()
        return super().query(query)

    def counts(self) -> Mapping[TaskStatus, int]:
        self._read_everything()
        return super().counts()


def test_growth_shows_which_call_reads_every_row() -> None:
    store = FetchThenFilterStore()
    result = run_probe(
        lambda: store,
        [50, 5_000],
        spec="tests:FetchThenFilterStore",
        samples=5,
        clock=lambda: store.rows_read / 1e6,  # 1 row read = 1 "µs"
    )
    assert result.sizes == [50, 5_000]
    # Reads every task: cost is the table size, growth is the size ratio.
    for label in ("counts()", "query(buckets={b}, limit=50)", "query(newest_first, limit=50)"):
        assert result.p50[label] == pytest.approx({50: 50.0, 5_000: 5_000.0}), label
        assert result.growth(label) == pytest.approx(100.0)
    # Keyed: one row whatever the size.
    assert result.p50["get"] == pytest.approx({50: 1.0, 5_000: 1.0})
    assert result.growth("get") == pytest.approx(1.0)
    # Calls this store does not count cost nothing in this model: flat at 0/0.
    assert result.p50["history(t)"] == {50: 0.0, 5_000: 0.0}
    table = format_table(result)
    assert "| `counts()` | 50 | 5,000 | 50 | 5,000 | ×100.0 |" in table
    assert "| `get` | 1 | 1 | 1 | 1 | ×1.0 |" in table


def test_probe_loads_through_the_api_and_leaves_the_store_consistent() -> None:
    store = InMemoryTaskStore()
    run_probe(lambda: store, [30, 300], samples=3)
    # After the probe the factory's store is closed (enter_store registers it).
    with pytest.raises(Exception, match="closed"):
        store.counts()


def test_loaded_data_matches_the_documented_shape() -> None:
    store = InMemoryTaskStore()
    seen: dict[str, Any] = {}

    def look(s: Any, n: int, r: Any) -> object:
        if seen:  # the probe calls twice (warm-up, then one sample); look once
            return None
        seen["counts"] = dict(s.counts())
        seen["bucket0_running"] = len(
            s.query(TaskQuery(buckets=frozenset({0}), statuses=frozenset({TaskStatus.RUNNING})))
        )
        seen["history"] = len(s.history("t00000010"))
        seen["claimable"] = len(
            s.claim_commands(now=T0 + timedelta(days=3650), lease_seconds=1, limit=10_000)
        )
        return None

    run_probe(lambda: store, [1_000], samples=1, calls=[HotCall("look", look)])
    assert seen["counts"][TaskStatus.RUNNING] == 128
    assert seen["counts"][TaskStatus.SUCCEEDED] == 1_000 - 128
    assert sum(seen["counts"].values()) == 1_000
    assert seen["bucket0_running"] == 2  # 128 RUNNING over 64 buckets
    assert seen["history"] == 2
    assert seen["claimable"] == 100  # a command for every tenth task


def test_real_clock_run_on_the_memory_store_has_every_row(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(
            [
                "reference_stores.memory:make_store",
                "--sizes",
                "20,200",
                "--samples",
                "5",
                "--json",
                str(out),
            ]
        )
    assert code == 0
    text = stdout.getvalue()
    for label in LABELS:
        assert f"| `{label}` |" in text, label
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["store"] == "reference_stores.memory:make_store"
    assert doc["sizes"] == [20, 200]
    assert set(doc["calls"]) == set(LABELS)
    for label, per_size in doc["calls"].items():
        assert set(per_size) == {"20", "200"}, label
        for cell in per_size.values():
            assert cell["samples"] == 5
            assert 0 <= cell["p50"] <= cell["p95"], (label, cell)
        assert doc["growth"][label] > 0


def test_main_rejects_a_bad_spec(capsys: pytest.CaptureFixture[str]) -> None:
    # The plugin's exit status (4) and messages: bench resolves specs with the same code.
    assert main(["reference_stores.memory"]) == 4
    assert "MODULE:ATTR" in capsys.readouterr().err
    assert main(["reference_stores.memory:no_such_factory"]) == 4
    assert "no attribute" in capsys.readouterr().err
    assert main(["no_such_module_xyz:make_store"]) == 4
    assert "cannot import" in capsys.readouterr().err


def test_main_refuses_a_factory_that_cannot_open_before_loading(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "benchbad.py").write_text(
        "def make_store():\n"
        "    raise OSError('cannot reach postgresql://bench:s3cr3t-B/x@db.example/x')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["benchbad:make_store", "--sizes", "10"]) == 4
    err = capsys.readouterr().err
    assert "calling benchbad:make_store() raised OSError" in err
    assert "s3cr3t-B" not in err and "bench:***@db.example" in err


def test_resolve_factory_finds_the_attribute() -> None:
    assert resolve_factory("reference_stores.memory:make_store") is make_store


def test_sizes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        run_probe(make_store, [0, 10])
    with pytest.raises(SystemExit) as exited:
        main(["reference_stores.memory:make_store", "--sizes", "ten"])
    assert exited.value.code == 4


def test_cli_bench_subcommand_prints_the_growth_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from chongming_conformance.commands import cli

    status = cli.main(["bench", "reference_stores.memory:make_store", "--sizes", "20,40",
                       "--samples", "3"])
    out = capsys.readouterr().out
    assert status == 0
    assert "| `counts()` |" in out and "growth 20→40" in out
