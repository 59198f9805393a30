"""The console script, and how the plugin finds and validates a shared store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from plugin_helpers import SUBPROCESS_TIMEOUT, load_report, run, table_outcome

from chongming_conformance import CATALOGUE_VERSION, CLAUSES, __version__

SCRIPT = Path(sys.executable).with_name("chongming-conformance")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True,
        timeout=SUBPROCESS_TIMEOUT, check=False,
    )


def test_version(tmp_path: Path) -> None:
    done = cli("--version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.strip() == (
        f"chongming-conformance {__version__} (clause catalogue {CATALOGUE_VERSION})"
    )


def test_clauses_json_and_markdown(tmp_path: Path) -> None:
    doc = json.loads(cli("clauses", "--format", "json", cwd=tmp_path).stdout)
    assert doc["catalogue_version"] == CATALOGUE_VERSION
    assert [c["id"] for c in doc["clauses"]] == list(CLAUSES)
    assert {c["level"] for c in doc["clauses"]} == {"MUST", "SHOULD"}
    md = cli("clauses", cwd=tmp_path).stdout
    for cid in CLAUSES:
        assert f"| `{cid}` |" in md


def test_check_defaults_to_sqlite_and_runs_only_the_suite(tmp_path: Path) -> None:
    (tmp_path / "test_unrelated.py").write_text("def test_x():\n    raise AssertionError\n")
    # The quick profile: what is pinned is the default store and the suite alone, not depth.
    done = cli("check", "--report", "r.json", "--profile", "quick", "-p", "no:cacheprovider",
               cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "chongming conformance: reference_stores.sqlite:make_store" in done.stdout
    assert table_outcome(done.stdout, "CLAIM-LEASE-BOUNDARY") == "PASS"
    assert "test_unrelated" not in done.stdout
    doc = load_report(tmp_path / "r.json")
    assert doc["store"]["spec"] == "reference_stores.sqlite:make_store"
    assert doc["run"]["partial"] is False


def test_check_passes_pytest_args_and_gate(tmp_path: Path) -> None:
    done = cli(
        "check", "reference_stores.memory:make_store", "--gate", "must",
        "--attest", "out/statement.json", "--badge", "out/badge.json",
        "--", "-k", "prune", "-p", "no:cacheprovider", cwd=tmp_path,
    )
    assert done.returncode == 1  # partial: a narrowed run never passes a gate
    assert "deselected by -k" in done.stdout
    assert "chongming gate (must): FAILED (partial run" in done.stdout
    # The attestation and the badge are written all the same, and say it.
    statement = json.loads((tmp_path / "out" / "statement.json").read_text())
    assert statement["predicate"]["result"] == "FAILED"
    assert json.loads((tmp_path / "out" / "badge.json").read_text())["message"].startswith(
        "partial run")
    verified = cli("verify", "out/statement.json", cwd=tmp_path)
    assert verified.returncode == 1
    assert "verify: FAILED: the result is FAILED, not PASSED (partial" in verified.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--chongming-attest=statement.txt"], "--chongming-attest='statement.txt' must end in .json"),
    (["--chongming-badge=badge.svg"], "--chongming-badge='badge.svg' must end in .json"),
    (["--chongming-attest-key=key.pem"], "--chongming-attest-key signs an attestation"),
    (["--chongming-attest=s.json", "--chongming-attest-key=missing.pem"],
     "--chongming-attest-key='missing.pem': no such file"),
])
def test_attestation_options_are_checked_before_the_run(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         "--chongming-store=reference_stores.memory:make_store", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT, check=False,
    )
    assert done.returncode == 4, done.stdout + done.stderr
    assert message in done.stderr
    assert "passed" not in done.stdout


def test_check_bad_gate_exits_like_the_plugin(tmp_path: Path) -> None:
    done = cli("check", "reference_stores.memory:make_store", "--gate", "maybe", cwd=tmp_path)
    assert done.returncode == 4, done.stderr  # pytest --chongming-gate=maybe gives 4 too
    assert "invalid choice: 'maybe'" in done.stderr
    assert "passed" not in done.stdout


def test_check_bad_spec_is_a_usage_error(tmp_path: Path) -> None:
    done = cli("check", "nocolon", cwd=tmp_path)
    assert done.returncode == 4
    assert "is not of the form MODULE:ATTR" in done.stderr


# -- shared stores ---------------------------------------------------------------------------

SHARING = '''
import contextlib
import functools
import sqlite3

from reference_stores.memory import InMemoryTaskStore, make_store


def _open_with(conn):
    return InMemoryTaskStore()


def make_shared_unpicklable():
    # Holds a live connection: not even dill (the harness's pickler) can ship it to workers.
    return functools.partial(_open_with, sqlite3.connect(":memory:"))


@contextlib.contextmanager
def make_shared_cm():
    yield functools.partial(InMemoryTaskStore)  # picklable opener, context-manager form


def make_single():
    return InMemoryTaskStore()


make_single.CHONGMING_CAPABILITIES = {"unsupported": {"cross_process": "memory only"}}
'''


@pytest.fixture
def sharing(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(sharing=SHARING)
    return pytester


def test_unpicklable_opener_is_a_usage_error(sharing: pytest.Pytester) -> None:
    result = run(
        sharing, "--chongming-store=sharing:make_store",
        "--chongming-shared-store=sharing:make_shared_unpicklable",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "cannot be pickled" in result.stderr.str()
    assert "functools.partial" in result.stderr.str()


def test_shared_store_contradicting_a_declaration_is_a_usage_error(
    sharing: pytest.Pytester,
) -> None:
    result = run(
        sharing, "--chongming-store=sharing:make_single",
        "--chongming-shared-store=sharing:make_shared_cm",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "declares cross_process unsupported" in result.stderr.str()


def test_explicit_shared_store_is_validated_and_shown(sharing: pytest.Pytester) -> None:
    result = run(
        sharing, "--chongming-store=sharing:make_store",
        "--chongming-shared-store=sharing:make_shared_cm", "-k", "protocol",
        "--chongming-report=r.json",
    )
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    result.stdout.fnmatch_lines(
        ["chongming: shared store sharing:make_shared_cm (--chongming-shared-store)*"]
    )
    doc = load_report(sharing.path / "r.json")
    assert doc["store"]["shared_source"] == "--chongming-shared-store"


def test_an_attestation_that_cannot_be_made_fails_the_run_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         "--chongming-store=reference_stores.memory:make_store", "-k", "get_missing",
         "--chongming-attest=s.json", "--chongming-attest-key=key.pem"],
        cwd=tmp_path, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT, check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "chongming attestation NOT written to" in done.stdout
    assert "key.pem is not an unencrypted PEM private key" in done.stdout
    assert not (tmp_path / "s.json").exists()
