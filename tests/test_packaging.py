"""The built wheel holds what an installed kit needs; an editable install would hide a gap.

The project's other tests run against the editable checkout, where every file
is on disk whatever the wheel holds. This test builds the wheel (``python -m
build``, the dev extra) and checks it: every module of the package and of the
reference stores, the packaged suite, the guide clause sections cite, the
pytest plugin entry point and the console script. ``.ci/run`` then installs
that wheel into a fresh venv and runs the gate from an empty directory.
"""

from __future__ import annotations

import configparser
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("build", reason="python -m build is in the dev extras")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
        check=True, capture_output=True, timeout=600,
    )
    [path] = out.glob("chongming_conformance-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_holds_every_module_and_the_suite(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    expected = {
        p.relative_to(ROOT / "src").as_posix()
        for p in (ROOT / "src" / "chongming_conformance").rglob("*.py")
    } | {p.relative_to(ROOT).as_posix() for p in (ROOT / "reference_stores").rglob("*.py")}
    missing = sorted(expected - names)
    assert missing == []
    assert "chongming_conformance/suite/test_stress.py" in names


def test_wheel_holds_the_package_data(wheel: zipfile.ZipFile) -> None:
    """The files beside the modules (the HTML report's stylesheet and script, py.typed)."""
    package = ROOT / "src" / "chongming_conformance"
    data = {
        p.relative_to(ROOT / "src").as_posix() for p in package.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    }
    assert {"chongming_conformance/report/assets/report.css",
            "chongming_conformance/report/assets/report.js",
            "chongming_conformance/py.typed"} <= data
    assert sorted(data - set(wheel.namelist())) == []


def test_wheel_carries_the_guide_clauses_cite(wheel: zipfile.ZipFile) -> None:
    packaged = wheel.read("chongming_conformance/backend-guide.md").decode("utf-8")
    assert packaged == (ROOT / "docs" / "backend-guide.md").read_text(encoding="utf-8")


def test_wheel_registers_the_plugin_and_the_cli(wheel: zipfile.ZipFile) -> None:
    [entry_points] = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    parser = configparser.ConfigParser()
    parser.read_string(wheel.read(entry_points).decode("utf-8"))
    assert parser["pytest11"]["chongming"] == "chongming_conformance.plugin"
    assert (parser["console_scripts"]["chongming-conformance"]
            == "chongming_conformance.commands.cli:main")


def test_wheel_metadata_offers_the_optional_extras(wheel: zipfile.ZipFile) -> None:
    [metadata] = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    text = wheel.read(metadata).decode("utf-8")
    assert "Provides-Extra: xdist" in text
    assert "Provides-Extra: postgres" in text
    assert "Provides-Extra: mariadb" in text
    assert "pytest-xdist" in text
