"""The nemesis: a seed gives one fault sequence; faults are applied, logged and healed."""

from __future__ import annotations

import contextlib
import itertools
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chongming_conformance.faults import Nemesis, Network, plan, read_nemesis_log
from chongming_conformance.faults.nemesis import NETWORK_KINDS, Fault, kinds_for


def test_a_seed_plans_the_same_faults_and_another_seed_others() -> None:
    kinds = kinds_for("network", network=True)
    first = list(itertools.islice(plan(5, kinds), 50))
    assert first == list(itertools.islice(plan(5, kinds), 50))
    assert first != list(itertools.islice(plan(6, kinds), 50))
    assert {f.kind for f in first} == set(kinds)  # 50 draws reach every kind
    assert [f.number for f in first] == list(range(1, 51))


def test_the_mode_decides_the_kinds() -> None:
    assert kinds_for("none", network=True) == ()
    assert kinds_for("pause", network=True) == ("pause",)
    assert kinds_for("network", network=False) == ("pause",)  # nothing routed: pauses only
    assert set(kinds_for("network", network=True)) == {*NETWORK_KINDS, "pause"}
    assert list(plan(0, ())) == []


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(ConnectionError):  # the proxy resets its side too
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[:2]
    stop.set()
    thread.join(5)
    server.close()


def _one(kind: str, duration: float = 0.0, every: bool = True) -> Iterator[Fault]:
    yield Fault(1, kind, 0.0, duration, every, 0)


def test_a_reset_reaches_a_live_connection_and_is_logged(echo: tuple[str, int],
                                                         tmp_path: Path) -> None:
    with Network() as net:
        address = net.route(*echo)
        client = socket.create_connection(address, timeout=5)
        client.sendall(b"ping")
        assert client.recv(4) == b"ping"
        nemesis = Nemesis(_one("reset"), network=net, pausable=dict,
                          log_path=tmp_path / "nemesis.jsonl")
        nemesis.start()
        deadline = time.monotonic() + 5
        while not nemesis.applied and time.monotonic() < deadline:
            time.sleep(0.01)
        healed = nemesis.stop()
        with pytest.raises(ConnectionError):  # RST: reset by peer, or broken pipe on send
            client.sendall(b"again")
            if not client.recv(5):
                raise ConnectionResetError("closed")
        client.close()
        [applied] = nemesis.applied
        assert applied.detail == "reset 1 connection(s)"
        assert applied.start <= applied.end <= healed
        [logged] = read_nemesis_log(tmp_path)
        assert logged["fault"]["kind"] == "reset" and logged["detail"] == applied.detail
        # healed: a new connection works
        again = socket.create_connection(address, timeout=5)
        again.sendall(b"pong")
        assert again.recv(4) == b"pong"
        again.close()


def test_a_blackhole_is_undone_when_the_nemesis_stops_early(echo: tuple[str, int],
                                                           tmp_path: Path) -> None:
    with Network() as net:
        address = net.route(*echo)
        nemesis = Nemesis(_one("blackhole", duration=60.0), network=net, pausable=dict,
                          log_path=tmp_path / "nemesis.jsonl")
        nemesis.start()
        time.sleep(0.3)
        client = socket.create_connection(address, timeout=0.5)
        client.sendall(b"lost")
        with pytest.raises(TimeoutError):
            client.recv(4)  # swallowed
        started = time.monotonic()
        nemesis.stop()
        assert time.monotonic() - started < 10  # stopping ends the 60 s fault at once
        fresh = socket.create_connection(address, timeout=5)
        fresh.sendall(b"back")
        assert fresh.recv(4) == b"back"
        fresh.close()
        client.close()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_pause_stops_a_worker_and_stop_always_continues_it(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        nemesis = Nemesis(_one("pause", duration=60.0, every=False), network=None,
                          pausable=lambda: {0: proc.pid}, log_path=tmp_path / "n.jsonl")
        nemesis.start()
        deadline = time.monotonic() + 5
        while _state(proc.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(proc.pid) == "T"  # stopped
        nemesis.stop()  # mid-pause: the worker must not stay stopped
        # (Not stopped: sleeping, running -- or, on a loaded machine, still in a disk read
        # of its start-up, "D".)
        assert _state(proc.pid) not in ("T", "t")
        assert nemesis.applied[0].detail == f"paused worker 0 (pid {proc.pid})"
    finally:
        proc.kill()
        proc.wait()


def test_a_pause_aims_at_a_worker_inside_a_write(tmp_path: Path) -> None:
    """Two workers; the log of worker 1 ends inside a save: it is the one stopped, while
    worker 0 (between calls) goes on."""
    from chongming_conformance.stress.scenarios.fault_workload import inside_write

    logs = {0: tmp_path / "w0.jsonl", 1: tmp_path / "w1.jsonl"}
    logs[0].write_text('{"ev":"inv","seq":1,"call":{"method":"save","args":{}}}\n'
                       '{"ev":"ret","seq":1,"ok":true}\n', encoding="utf-8")
    logs[1].write_text('{"ev":"ret","seq":1,"ok":true}\n'
                       '{"ev":"inv","seq":2,"call":{"method":"save","args":{}}}\n',
                       encoding="utf-8")
    assert not inside_write(logs[0]) and inside_write(logs[1])
    reading = tmp_path / "r.jsonl"
    reading.write_text('{"ev":"inv","seq":2,"call":{"method":"get","args":{}}}\n',
                       encoding="utf-8")
    assert not inside_write(reading) and not inside_write(tmp_path / "missing.jsonl")
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
             for _ in range(2)]
    try:
        pids = {i: p.pid for i, p in enumerate(procs)}
        nemesis = Nemesis(_one("pause", duration=60.0, every=False), network=None,
                          pausable=lambda: pids, log_path=tmp_path / "n.jsonl",
                          writing=lambda: {i: pid for i, pid in pids.items()
                                           if inside_write(logs[i])})
        nemesis.start()
        deadline = time.monotonic() + 5
        while _state(procs[1].pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(procs[1].pid) == "T" and _state(procs[0].pid) in ("S", "R")
        nemesis.stop()
        assert nemesis.applied[0].detail == f"paused worker 1 (pid {procs[1].pid}) inside a write"
    finally:
        for p in procs:
            p.kill()
            p.wait()
