"""The latitude suite (issue 22, item 3): the kit never fails a correct store.

Each store of ``latitude_stores.py`` / ``latitude_sqlite.py`` is correct and uses one
freedom the guide leaves open (its docstring says which, and the sentence that allows
it). Each is run through the plugin exactly as a third party would run it -- a fresh
interpreter in an empty directory, ``--chongming-store=MODULE:ATTR`` (plus
``--chongming-shared-store`` for the shared ones), the default (ci) hypothesis and stress
profiles, ``--chongming-gate=must`` -- and must exit 0 with ``gate_passed`` true in its
JSON report. On failure the message lists every gated MUST clause that is not PASS,
UNSUPPORTED or DEVIATION, with its note and failing tests, and the tail of the output.

One subprocess per store, so the suite parallelises under pytest-xdist (``-n 2``).
"""

from __future__ import annotations

import json
import os
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
#: A whole run takes well under a minute; this only stops a hung one.
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


LATITUDES: tuple[Latitude, ...] = (
    *(
        Latitude(f"latitude_stores:{cls.__name__}", type_name=cls.__name__)
        for cls in latitude_stores.STORES
    ),
    *(
        Latitude(
            f"latitude_sqlite:make_store_{cls.__name__}",
            shared=f"latitude_sqlite:make_shared_store_{cls.__name__}",
            type_name=cls.__name__,
        )
        for cls in latitude_sqlite.STORES
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


def gate_failures(doc: dict[str, Any]) -> str:
    """Every gated MUST clause that fails the gate, its note and its failing tests."""
    lines: list[str] = []
    for entry in doc["clauses"]:
        if entry["level"] != "MUST" or not entry["gated"] or entry["outcome"] in PASSING:
            continue
        lines.append(f"{entry['id']}: {entry['outcome']} -- {entry['note']}")
        for test in entry["tests"]:
            if test["outcome"] not in ("passed", "skipped", "xfailed"):
                message = (test["message"] or "").strip().splitlines()
                first = message[0] if message else ""
                lines.append(f"    {test['outcome']}: {test['nodeid']}: {first[:300]}")
    partial = doc["run"]["partial_reasons"]
    if partial:
        lines.append(f"partial run: {partial}")
    return "\n".join(lines) or "(no gated MUST clause failed)"


@pytest.mark.parametrize("latitude", [pytest.param(lat, id=lat.id) for lat in LATITUDES])
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
        f"{gate_failures(doc)}\n--- output tail ---\n{tail}"
    )
