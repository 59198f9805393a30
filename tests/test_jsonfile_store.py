"""JsonFileTaskStore: the third-party template passes the contract, never caches, writes atomically.

Its one-process limit is not tested here as a pass: the stress harness runs it
through ``make_shared_store`` to show the failures a lock-free file store has.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chongming_conformance import StoreError, TaskStatus
from chongming_conformance.checking.contract import StoreContract
from chongming_conformance.protocol.clauses import checks
from chongming_conformance.strategies.samples import at, command, snapshot, transition
from reference_stores import jsonfile
from reference_stores.jsonfile import JsonFileTaskStore


class TestJsonFileContract(StoreContract):
    def make_store(self) -> Any:
        return jsonfile.make_store()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "tasks.json"


@pytest.fixture
def store(path: Path) -> Iterator[JsonFileTaskStore]:
    opened = JsonFileTaskStore(path)
    yield opened
    opened.close()


def test_template_imports_only_model_errors_and_codec() -> None:
    # The third-party template needs nothing from the kit but these three modules.
    tree = ast.parse(inspect.getsource(jsonfile))
    kit_imports = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.split(".")[0] in ("chongming_conformance", "reference_stores")
    }
    assert kit_imports == {
        "chongming_conformance.protocol.model",
        "chongming_conformance.protocol.errors",
        "chongming_conformance.protocol.codec",
    }
    assert JsonFileTaskStore.__bases__ == (object,)


@checks("XP-SHARED-VISIBILITY")
def test_no_cache_two_instances_on_one_file_see_each_others_writes(path: Path) -> None:
    controller, worker = JsonFileTaskStore(path), JsonFileTaskStore(path)
    try:
        worker.create(snapshot("t1", version=1))
        assert controller.get("t1") is not None
        # The cross-process control path: the controller submits, the worker claims.
        controller.submit_command(command("c1", "t1"))
        assert [c.command_id for c in worker.claim_commands(now=at(0), lease_seconds=30)] == ["c1"]
        assert controller.claim_commands(now=at(1), lease_seconds=30) == []
        worker.save(snapshot("t1", version=2, status=TaskStatus.RUNNING), expect_version=1)
        seen = controller.get("t1")
        assert seen is not None and seen.status_version == 2
        # A write that bypasses both instances is seen too: nothing is cached.
        data = json.loads(path.read_text(encoding="utf-8"))
        data["tasks"]["t1"]["name"] = "edited-on-disk"
        path.write_text(json.dumps(data), encoding="utf-8")
        seen = worker.get("t1")
        assert seen is not None and seen.name == "edited-on-disk"
    finally:
        controller.close()
        worker.close()


def test_write_goes_through_a_pid_named_temp_file(
    store: JsonFileTaskStore, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replaced: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: Any, dst: Any) -> None:
        replaced.append((os.fspath(src), os.fspath(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    store.create(snapshot("t1"))
    assert len(replaced) == 1
    src, dst = replaced[0]
    assert dst == os.fspath(path)
    assert str(os.getpid()) in Path(src).name
    assert Path(src).parent == path.parent  # same filesystem: the rename is atomic
    assert not Path(src).exists()


def test_crash_between_temp_write_and_replace_leaves_the_old_file(
    store: JsonFileTaskStore, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create(snapshot("t1"))
    store.append(transition("t1", 1))
    before = path.read_bytes()

    def crash(src: Any, dst: Any) -> None:
        assert Path(src).read_text(encoding="ascii"), "the temp file holds the new content"
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(StoreError):
        store.save(snapshot("t1", version=2, status=TaskStatus.RUNNING), expect_version=1)
    with pytest.raises(StoreError):
        store.create(snapshot("t2"))
    monkeypatch.undo()
    assert path.read_bytes() == before, "the old file changed although the replace failed"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name], "temp file left over"
    current = store.get("t1")
    assert current is not None and current.status_version == 1
    assert store.get("t2") is None


def test_a_corrupt_file_raises_store_error(store: JsonFileTaskStore, path: Path) -> None:
    path.write_text('{"format": 1, "tasks": {', encoding="utf-8")
    with pytest.raises(StoreError):
        store.get("t1")
    with pytest.raises(StoreError):
        store.create(snapshot("t1"))
    assert path.read_text(encoding="utf-8") == '{"format": 1, "tasks": {'


def test_a_missing_file_is_an_empty_store_and_reads_do_not_create_it(
    store: JsonFileTaskStore, path: Path
) -> None:
    assert store.query() == []
    assert store.history("t1") == []
    store.touch("t1", heartbeat_at=at(1))  # unknown task: a no-op, not a write
    assert not path.exists()
