"""Every bad spec is one usage error (exit status 4) with one precise message, not N failures."""

from __future__ import annotations

import pytest
from plugin_helpers import run

STORES = '''
import time

from reference_stores.memory import InMemoryTaskStore, make_store

NOT_CALLABLE = {"a": 1}


def boom():
    raise RuntimeError("database is on fire")


class Broken(InMemoryTaskStore):
    history = None  # not a method any more

    def save(self, snapshot, *, version):  # the protocol says expect_version
        raise AssertionError("never called")


def make_broken():
    return Broken()


def make_sleepy():
    time.sleep(3600)


def make_misdeclared():
    return InMemoryTaskStore()


make_misdeclared.CHONGMING_CAPABILITIES = {"deviations": {"QUERY-TAG-EXACTT": "typo"}}
'''


@pytest.fixture
def stores(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(mystores=STORES)
    pytester.makepyfile(badimport="import json\nraise ImportError('needs libfoo 2.0')\n")
    pytester.makepyfile(
        genbroken="class Half:\n    def get(self, task_id):\n        return None\n\n"
        "def make_store():\n    yield Half()\n"
    )
    pytester.makepyfile(
        capmod="from reference_stores.memory import make_store\n"
        "CHONGMING_CAPABILITIES = {'unsupported': {'cross_proces': 'one file'}}\n"
    )
    return pytester


CASES = {
    "no-colon": (
        ["--chongming-store=mystores"],
        ["is not of the form MODULE:ATTR", "needs a colon", "mystores:make_store"],
    ),
    "module-missing": (
        ["--chongming-store=no_such_store_module:make_store"],
        ["cannot import module 'no_such_store_module'",
         "ModuleNotFoundError: No module named 'no_such_store_module'"],
    ),
    "module-raises": (
        ["--chongming-store=badimport:make_store"],
        ["importing module 'badimport' raised ImportError: needs libfoo 2.0", "badimport.py"],
    ),
    "attribute-missing": (
        ["--chongming-store=mystores:make_stor"],
        ["has no attribute 'make_stor'", "did you mean 'make_store'"],
    ),
    "not-callable": (
        ["--chongming-store=mystores:NOT_CALLABLE"],
        ["'NOT_CALLABLE' is a dict, not callable"],
    ),
    "factory-raises": (
        ["--chongming-store=mystores:boom"],
        ["calling mystores:boom() raised RuntimeError: database is on fire",
         "Traceback (most recent call last)", "in boom"],
    ),
    "not-a-taskstore": (
        ["--chongming-store=mystores:make_broken"],
        ["mystores:make_broken() gave mystores.Broken, which is not a TaskStore",
         "missing method history()", "save() lacks keyword-only 'expect_version'"],
    ),
    "generator-yields-a-non-store": (
        ["--chongming-store=genbroken:make_store"],
        ["genbroken:make_store() gave genbroken.Half, which is not a TaskStore",
         "missing method create()", "missing method close()"],
    ),
    "factory-hangs": (
        ["--chongming-store=mystores:make_sleepy", "--chongming-timeout=0.5"],
        ["store call mystores:make_sleepy() did not return within 0.5 s"],
    ),
    "unknown-capability": (
        ["--chongming-store=capmod:make_store"],
        ["capmod.CHONGMING_CAPABILITIES declares unknown capability 'cross_proces'",
         "did you mean 'cross_process'"],
    ),
    "unknown-deviation-clause": (
        ["--chongming-store=mystores:make_misdeclared"],
        ["deviation from unknown clause 'QUERY-TAG-EXACTT'", "did you mean 'QUERY-TAG-EXACT'"],
    ),
    "bad-report-suffix": (
        ["--chongming-store=mystores:make_store", "--chongming-report=out.html"],
        ["must end in .json or .md"],
    ),
    "negative-timeout": (
        ["--chongming-store=mystores:make_store", "--chongming-timeout=-1"],
        ["must be >= 0"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_spec_is_one_usage_error(stores: pytest.Pytester, case: str) -> None:
    args, fragments = CASES[case]
    result = run(stores, *args)
    err = result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, err + result.stdout.str()
    assert err.count("ERROR:") == 1, err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in:\n{err}"
    assert "passed" not in result.stdout.str() and "failed" not in result.stdout.str()


def test_unknown_profile_is_a_usage_error(stores: pytest.Pytester) -> None:
    result = run(
        stores, "--chongming-store=mystores:make_store", "--chongming-profile=no-such-profile"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--chongming-profile='no-such-profile'" in result.stderr.str()


def test_ini_and_env_spec_errors_name_their_source(
    stores: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHONGMING_STORE", "mystores")
    result = run(stores)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "environment variable CHONGMING_STORE='mystores' is not of the form" in (
        result.stderr.str()
    )
