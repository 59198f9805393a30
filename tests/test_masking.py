"""No secret leaves the kit: generated passwords in every form, through every output path.

Three layers, all driven by hypothesis-generated secrets:

* ``mask_secrets``/``mask_all`` on text and JSON-like values holding a secret in
  each form the docs list (URL userinfo with ``/ : @`` inside, ``password=``,
  ``sslpassword=``, ``PGPASSWORD=``, quoted key=value, JSON and dict keys);
* the spec checks the plugin, ``check`` and ``bench`` share (:mod:`specs`), when
  the author's factory raises or its store fails to open with the secret in
  the error;
* real plugin runs in a subprocess (a few examples, each a couple of runs): a
  store module that raises at import, a factory that logs (as a driver's pool
  does) while the plugin opens it, and a store whose calls fail, print and log
  (also live, ``--log-cli-level``) with every form at once, whose repr carries
  them, whose shared-store workers log and crash with them -- with
  ``--junitxml``, JSON and Markdown reports and ``-rA``. Standard output,
  standard error, every report file and every kept stress log are searched
  for each secret.

Each check also asserts the text around the secret survives (the host, the
error), so "the secret is absent" cannot pass because the output is empty.
"""

from __future__ import annotations

import io
import json
import logging
import os
import string
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from chongming_conformance.report.masking import mask_all, mask_secrets, masked_logging
from chongming_conformance.seam.specs import SpecError, open_check

REPO = Path(__file__).resolve().parents[1]

# Every printable character but whitespace, quotes and backslash (a password holding those
# is escaped by whoever prints it, so the literal never appears anyway) and the XML
# specials (JUnit would escape them, making "absent" vacuous).
_ALPHABET = "".join(
    c for c in string.printable if not c.isspace() and c not in "'\"\\&<>"
)
#: A password: long enough never to occur by chance, with at least one letter and digit.
secrets = st.text(_ALPHABET, min_size=8, max_size=24).filter(
    lambda s: any(c.isalpha() for c in s) and any(c.isdigit() for c in s)
)


def forms(secret: str) -> dict[str, str]:
    """The secret in every form the kit promises to mask (docs/security.md)."""
    user_safe = "audit"
    return {
        "url": f"postgresql://{user_safe}:{secret}@db.example:5432/prod",
        "url-other-scheme": f"redis://:{secret}@cache.example/0",
        "kv": f"host=db.example password={secret} dbname=prod",
        "kv-quoted": f"host=db.example password='{secret}' user=audit",
        "sslpassword": f"sslmode=verify-full sslpassword={secret} host=db.example",
        "env": f"PGPASSWORD={secret} psql -h db.example",
        "json": json.dumps({"host": "db.example", "password": secret}),
        "dict-repr": repr({"host": "db.example", "db_password": secret}),
        "token": f"api_token: {secret} (expires never)",
    }


def _assert_masked(text: str, secret: str, *, keeps: str = "db.example") -> None:
    assert secret not in text, f"secret {secret!r} leaked in:\n{text}"
    assert keeps in text, f"masking ate the context {keeps!r} too:\n{text}"


# -- layer 1: the masking functions ---------------------------------------------------------
@given(secret=secrets, before=st.text(max_size=20), after=st.text(max_size=20))
def test_every_form_is_masked_wherever_it_sits(secret: str, before: str, after: str) -> None:
    assume(secret not in before and secret not in after)
    for name, form in forms(secret).items():
        masked = mask_secrets(f"{before} {form} {after}")
        assert secret not in masked, (name, masked)
        assert "***" in masked, (name, masked)


@given(secret=secrets)
def test_forms_combined_in_one_message_are_all_masked(secret: str) -> None:
    text = "could not connect: " + "; ".join(forms(secret).values())
    _assert_masked(mask_secrets(text), secret)


@given(secret=secrets)
def test_masked_json_stays_json(secret: str) -> None:
    masked = mask_secrets(forms(secret)["json"])
    assert json.loads(masked) == {"host": "db.example", "password": "***"}


@given(secret=secrets, key=st.sampled_from(["password", "PGPASSWORD", "sslpassword",
                                            "client_secret", "auth_token"]))
def test_mask_all_replaces_values_under_secret_keys(secret: str, key: str) -> None:
    doc: dict[str, Any] = {
        "store": {key: secret, "host": "db.example"},
        "messages": [forms(secret)["url"], {"nested": forms(secret)["kv"]}],
    }
    masked = mask_all(doc)
    _assert_masked(json.dumps(masked), secret)
    assert masked["store"][key] == "***"


@given(secret=secrets)
def test_log_records_are_masked_whichever_handler_prints_them(secret: str) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    logger = logging.getLogger("chongming.test.driver")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        restore = masked_logging()
        try:
            logger.warning("error connecting in %r: %s", "pool", forms(secret)["url"])
            try:
                raise ConnectionError(forms(secret)["kv"])
            except ConnectionError:
                logger.exception("retrying %s", forms(secret)["env"])
        finally:
            restore()
        masked = stream.getvalue()
        _assert_masked(masked, secret)
        assert "error connecting in 'pool'" in masked
        assert "ConnectionError: host=db.example" in masked  # the traceback, masked too
        # Restored: the factory the process had before is back (the kit leaves no trace).
        logger.warning("after: %s", secret)
        assert stream.getvalue().endswith(f"after: {secret}\n")
    finally:
        logger.removeHandler(handler)


# -- layer 2: the shared spec checks (what the plugin, check and bench print) ------------------
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=secrets)
def test_spec_errors_are_masked(secret: str) -> None:
    text = " | ".join(forms(secret).values())

    def raises() -> Any:
        raise ConnectionError(f"cannot connect: {text}")

    class Opening:
        def __enter__(self) -> Any:
            raise OSError(f"open failed: {text}")

        def __exit__(self, *exc: object) -> None:
            return None

    factories: list[tuple[Callable[[], Any], str]] = [
        (raises, "raised ConnectionError"),
        (Opening, "failed with OSError"),
    ]
    for factory, what in factories:
        with pytest.raises(SpecError) as caught:
            open_check(factory, "leaky:make_store", "--chongming-store", 0)
        message = str(caught.value)
        assert what in message
        _assert_masked(message, secret)


# -- layer 3: real plugin runs ------------------------------------------------------------
LEAKY = '''
"""A store that puts the secrets (read from forms.json, never written here) everywhere."""
import contextlib
import json
import logging
import os
import pathlib

import multiprocess

from reference_stores.memory import InMemoryTaskStore

TEXT = " | ".join(json.loads(pathlib.Path(__file__).with_name("forms.json").read_text()))
MODE = os.environ["LEAKY_MODE"]
if MODE == "import":
    raise RuntimeError("cannot configure the store: " + TEXT)


class Leaky(InMemoryTaskStore):
    def __repr__(self):
        return f"Leaky({TEXT})"

    def counts(self):
        print("stdout: connecting with " + TEXT)
        logging.getLogger("leaky").error("log: retrying %s", TEXT)
        raise RuntimeError("counts failed: " + TEXT)


@contextlib.contextmanager
def _opening():
    # As psycopg_pool does while the plugin opens the store: before pytest captures
    # anything, so Python's last-resort handler prints it.
    logging.getLogger("leaky.pool").warning("error connecting in 'pool': %s", TEXT)
    raise ConnectionError("open failed: " + TEXT)
    yield


def make_store():
    if MODE == "open":
        return _opening()
    return Leaky()


def open_shared():
    if multiprocess.current_process().name != "MainProcess":
        logging.getLogger("leaky.pool").error("worker log: %s", TEXT)
        raise ConnectionError("worker cannot connect: " + TEXT)
    return Leaky()


def make_shared_store():
    yield open_shared
'''


def _plugin_run(tmp: Path, mode: str, *extra: str) -> tuple[subprocess.CompletedProcess[str],
                                                             Path]:
    """One plugin run in a fresh interpreter; returns it and the directory its temp files use."""
    scratch = tmp / f"tmp-{mode}"
    scratch.mkdir()
    env = {**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{REPO}", "LEAKY_MODE": mode,
           "TMPDIR": str(scratch)}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--chongming-suite-only",
         "--chongming-store=leaky:make_store", *extra],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=600,
    )
    return done, scratch


def _files(root: Path) -> dict[Path, str]:
    return {
        p: p.read_text(encoding="utf-8", errors="replace")
        for p in root.rglob("*") if p.is_file() and not p.name.endswith((".pyc", ".db"))
    }


# Two examples, generated only: a shrink would rerun whole plugin runs many times over.
@settings(max_examples=2, deadline=None, derandomize=True, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(secret=secrets)
def test_no_output_path_of_a_plugin_run_shows_the_secret(
    tmp_path_factory: pytest.TempPathFactory, secret: str
) -> None:
    tmp = tmp_path_factory.mktemp("leaky")
    (tmp / "leaky.py").write_text(LEAKY)
    (tmp / "forms.json").write_text(json.dumps(list(forms(secret).values())))

    # Usage errors: the store module raises at import, or its store fails to open.
    for mode, what in (("import", "cannot configure the store"), ("open", "open failed")):
        done, scratch = _plugin_run(tmp, mode)
        assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stderr
        assert what in done.stderr
        if mode == "open":  # the driver's own log line is printed, masked
            assert "error connecting in 'pool': postgresql://audit:***@" in done.stderr
        _assert_masked(done.stdout + done.stderr, secret)
        for path, text in _files(scratch).items():
            assert secret not in text, f"secret leaked in {path}"

    # A full run: failing tests, captured output and logs, the store's repr in the header and
    # reports, crashing stress workers whose logs are kept.
    reports = tmp / "out"
    done, scratch = _plugin_run(
        # --log-cli-level: pytest prints log records live, outside any report section.
        tmp, "run", "-k", "counts_all_keys or counts_per_status or claim_race", "-rA",
        "--log-cli-level=ERROR",
        "--chongming-stress=quick", "--chongming-stress-deadline=20",
        f"--junitxml={reports / 'junit.xml'}",
        f"--chongming-report={reports / 'report.json'}",
        f"--chongming-report={reports / 'report.md'}",
    )
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert "counts failed: postgresql://audit:***@db.example" in output
    assert "stdout: connecting with" in output and "log: retrying" in output
    assert "Leaky(postgresql://audit:***@" in output  # the header shows the store's repr
    _assert_masked(output, secret)
    written = _files(reports)
    assert set(p.name for p in written) == {"junit.xml", "report.json", "report.md"}
    assert "counts failed" in written[reports / "junit.xml"]
    for text in written.values():
        _assert_masked(text, secret)
    kept = {p: t for p, t in _files(scratch).items() if p.suffix == ".jsonl"}
    assert any("worker cannot connect" in t for t in kept.values()), sorted(kept)
    for path, text in kept.items():
        assert secret not in text, f"secret leaked in the kept stress log {path}"
