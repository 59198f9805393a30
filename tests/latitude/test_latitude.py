"""The latitude suite (issue 22, item 3): the kit never fails a correct store.

Each store of ``latitude_stores.py`` / ``latitude_sqlite.py`` is correct and uses one
freedom the guide leaves open (its docstring says which, and the sentence that allows
it). Each is run through the plugin exactly as a third party would run it -- a fresh
interpreter in an empty directory, ``--chongming-store=MODULE:ATTR`` (plus
``--chongming-shared-store`` for the shared ones), the default (ci) hypothesis and stress
profiles, ``--chongming-gate=must`` -- and must exit 0 with ``gate_passed`` true in its
JSON report. On failure the message lists every gated MUST clause that is not PASS,
UNSUPPORTED or DEVIATION (and any other FAIL), with its note, every failed suite test with
the exception it failed on and its blames, and the tail of the output.

One subprocess per store, so the suite parallelises under pytest-xdist (``-n 2``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import latitude_sqlite
import latitude_stores
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
#: A whole run takes 10-70 s on a loaded 2-core box; this only stops a hung one.
RUN_TIMEOUT = 900.0
#: Outcomes that pass the must gate.
PASSING = frozenset({"PASS", "UNSUPPORTED", "DEVIATION"})


@dataclass(frozen=True)
class Latitude:
    """One correct store, as a third party names it on the command line."""

    store: str
    shared: str | None = None
    #: The class the factory must produce (guards against a mis-wired spec).
    type_name: str = ""

    @property
    def id(self) -> str:
        return self.type_name


#: The shared SQLite stores first: they take longest (their stress scenarios), and under
#: pytest-xdist the short in-memory runs then fill in around them instead of trailing.
LATITUDES: tuple[Latitude, ...] = (
    *(
        Latitude(
            f"latitude_sqlite:make_store_{cls.__name__}",
            shared=f"latitude_sqlite:make_shared_store_{cls.__name__}",
            type_name=cls.__name__,
        )
        for cls in latitude_sqlite.STORES
    ),
    *(
        Latitude(f"latitude_stores:{cls.__name__}", type_name=cls.__name__)
        for cls in latitude_stores.STORES
    ),
)


def command(latitude: Latitude, report: Path) -> list[str]:
    """The command line a backend author would type to gate their store."""
    args = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
        f"--chongming-store={latitude.store}",
        "--chongming-gate=must",
        "--chongming-suite-only",
        f"--chongming-report={report}",
    ]
    if latitude.shared:
        args.append(f"--chongming-shared-store={latitude.shared}")
    return args


def environment() -> dict[str, str]:
    """This environment without anything that would steer the child run: no CHONGMING_*
    spec or test setting, no PYTEST_* (addopts, xdist worker ids); the stores importable."""
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("CHONGMING_", "PYTEST_"))
    }
    env["PYTHONPATH"] = os.pathsep.join((str(HERE), str(ROOT)))
    return env


#: The line of a failure message that says what went wrong: the exception, or a blame.
_REASON = re.compile(
    r"^E\s+((?:[\w.]+\.)?\w*(?:Error|Conflict|Exception|Timeout)\w*:.*|chongming-blame:.*)$"
)


def _reasons(message: str | None) -> list[str]:
    """The exception and blame lines of a failure message, first ones first, each once."""
    found: list[str] = []
    for line in (message or "").splitlines():
        m = _REASON.match(line)
        if m and m.group(1) not in found:
            found.append(m.group(1))
    if found:
        return found[:4]
    # The report keeps a message's last 6000 characters: a long state-machine trace loses
    # its exception line. Its last step and the failing line are left.
    lines = (message or "").strip().splitlines()
    steps = [line[1:].strip() for line in lines if line.startswith("E ") and "state." in line]
    return [f"last step: {s}" for s in steps[-2:-1]] + lines[-1:]


def failures(doc: dict[str, Any]) -> str:
    """What made the run fail: every gated MUST clause not PASS / UNSUPPORTED / DEVIATION and
    every FAIL of another level, with its note; then every failed suite test, with its
    blames and the exception it failed on (a failed test fails pytest's exit status even
    when the gate passes)."""
    lines: list[str] = []
    tests: dict[str, dict[str, Any]] = {}
    for entry in doc["clauses"]:
        gating = entry["level"] == "MUST" and entry["gated"]
        if entry["outcome"] == "FAIL" or (gating and entry["outcome"] not in PASSING):
            lines.append(f"{entry['level']} {entry['id']}: {entry['outcome']} -- {entry['note']}")
        for test in entry["tests"]:
            if test["outcome"] in ("failed", "xpassed"):
                tests[test["nodeid"]] = test
    for nodeid, test in tests.items():
        lines.append(f"{test['outcome']}: {nodeid.split('::', 1)[-1]} blames={test['blames']}")
        lines.extend(f"    {reason[:300]}" for reason in _reasons(test["message"]))
    if doc["run"]["partial_reasons"]:
        lines.append(f"partial run: {doc['run']['partial_reasons']}")
    return "\n".join(lines) or "(no clause and no suite test failed)"


def _param(latitude: Latitude) -> Any:
    """CI runs every freedom once: a refusal's ValueError twin (the same store refusing with
    ValueError instead of StoreError, which every check accepts alike, as
    test_latitude_stores.py shows store by store in milliseconds) runs its whole gate only
    under ``-m full_evidence`` -- five gates, about 190 s of CPU."""
    twin = latitude.type_name.endswith("ValueError")
    return pytest.param(latitude, id=latitude.id,
                        marks=(pytest.mark.full_evidence,) if twin else ())


@pytest.mark.parametrize("latitude", [_param(lat) for lat in LATITUDES])
def test_correct_store_passes_the_must_gate(latitude: Latitude, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    proc = subprocess.run(
        command(latitude, report), cwd=tmp_path, env=environment(), capture_output=True,
        text=True, timeout=RUN_TIMEOUT, check=False,
    )
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-60:])
    assert report.exists(), f"no report (exit status {proc.returncode}):\n{tail}"
    doc: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    assert doc["store"]["type"].endswith(f".{latitude.type_name}"), doc["store"]
    assert proc.returncode == 0 and doc["run"]["gate_passed"] is True, (
        f"{latitude.store}: exit status {proc.returncode}, verdict: {doc['verdict']}\n"
        f"{failures(doc)}\n--- output tail ---\n{tail}"
    )
