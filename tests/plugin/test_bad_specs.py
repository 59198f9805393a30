"""Every bad spec is one usage error (exit status 4) with one precise message, not N failures."""

from __future__ import annotations

import pytest
from plugin_helpers import run

STORES = '''
import contextlib
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

# Split literals: a secret written whole in this source would show in traceback source lines.
DSN = "postgresql://audit:" "s3cret/" "p@ss" "@db.example:5432/prod"
ENV_SECRET = "env" "s3cret"
KEY = "k3y" "=v4lue"


def raises_dsn():
    raise ValueError(f'missing "=" after "{DSN}"')


class _Opening:
    def __enter__(self):
        raise ConnectionError(f"could not connect to {DSN} (PGPASSWORD={ENV_SECRET})")

    def __exit__(self, *exc):
        return False


def open_fails():
    return _Opening()


def yields_nothing():
    return
    yield


@contextlib.contextmanager
def cm_yields_nothing():
    if False:
        yield


class _Connection:
    """An opener holding a live resource: it cannot be pickled, and its repr has the DSN."""

    def __init__(self):
        self.cursor = (row for row in ())  # dill cannot pickle a generator

    def __call__(self):
        return InMemoryTaskStore()

    def __repr__(self):
        return f"_Connection(dsn='{DSN}', password='{KEY}')"


def make_unpicklable_shared():
    yield _Connection()
'''

#: Every secret the stores above carry; none may appear in any output.
SECRETS = ("s3cret/p@ss", "envs3cret", "k3y=v4lue")


@pytest.fixture
def stores(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(mystores=STORES)
    pytester.makepyfile(badimport="import json\nraise ImportError('needs libfoo 2.0')\n")
    pytester.makepyfile(
        dsnimport="raise RuntimeError('cannot reach postgresql://audit:s3cret/p@ss@db/x')\n"
    )
    pytester.makepyfile(hangimport="import time\ntime.sleep(3600)\n")
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
        ["--chongming-store=mystores:make_store", "--chongming-report=out.htm"],
        ["must end in .json, .md, .html"],
    ),
    "import-raises-with-dsn": (
        ["--chongming-store=dsnimport:make_store"],
        ["importing module 'dsnimport' raised RuntimeError: cannot reach "
         "postgresql://audit:***@db/x"],
    ),
    "import-hangs": (
        ["--chongming-store=hangimport:make_store", "--chongming-timeout=0.5"],
        ["store call import hangimport did not return within 0.5 s"],
    ),
    "factory-raises-with-dsn": (
        ["--chongming-store=mystores:raises_dsn"],
        ["calling mystores:raises_dsn() raised ValueError: missing \"=\" after "
         "\"postgresql://audit:***@db.example:5432/prod\""],
    ),
    "open-fails-with-dsn": (
        ["--chongming-store=mystores:open_fails"],
        ["opening a store with mystores:open_fails() failed with ConnectionError: could not "
         "connect to postgresql://audit:***@db.example:5432/prod (PGPASSWORD=***"],
    ),
    "generator-yields-nothing": (
        ["--chongming-store=mystores:yields_nothing"],
        ["mystores:yields_nothing() is a generator that returned without yielding anything"],
    ),
    "context-manager-yields-nothing": (
        ["--chongming-store=mystores:cm_yields_nothing"],
        ["opening a store with mystores:cm_yields_nothing() failed with RuntimeError: "
         "generator didn't yield"],
    ),
    "unpicklable-opener-with-dsn": (
        ["--chongming-store=mystores:make_store",
         "--chongming-shared-store=mystores:make_unpicklable_shared"],
        ["the opener _Connection(dsn='postgresql://audit:***@db.example:5432/prod', "
         "password='***') cannot be pickled"],
    ),
    "profile-checked-before-the-store-opens": (
        ["--chongming-store=mystores:make_sleepy", "--chongming-profile=bogus"],
        ["--chongming-profile='bogus': unknown chongming profile 'bogus'"],
    ),
    "report-parent-is-a-file": (
        ["--chongming-store=mystores:make_store", "--chongming-report=mystores.py/out.json"],
        ["--chongming-report='mystores.py/out.json'",
         "mystores.py to be a directory, but it is a file"],
    ),
    "report-is-a-directory": (
        ["--chongming-store=mystores:make_store", "--chongming-report=sub.json"],
        ["sub.json is a directory"],
    ),
    "infinite-timeout": (
        ["--chongming-store=mystores:make_store", "--chongming-timeout=nan"],
        ["--chongming-timeout=nan must be a finite number >= 0"],
    ),
    "negative-timeout": (
        ["--chongming-store=mystores:make_store", "--chongming-timeout=-1"],
        ["must be a finite number >= 0"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_spec_is_one_usage_error(stores: pytest.Pytester, case: str) -> None:
    args, fragments = CASES[case]
    (stores.path / "sub.json").mkdir()
    result = run(stores, *args)
    err = result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, err + result.stdout.str()
    assert err.count("ERROR:") == 1, err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in:\n{err}"
    assert "passed" not in result.stdout.str() and "failed" not in result.stdout.str()
    everything = err + result.stdout.str()
    for secret in SECRETS:
        assert secret not in everything, f"{secret!r} leaked:\n{everything}"


def test_bogus_profile_without_a_store_is_a_usage_error(stores: pytest.Pytester) -> None:
    # Without a store the plugin is idle, but an option given to it is still checked.
    result = run(stores, "--chongming-profile=bogus")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--chongming-profile='bogus': unknown chongming profile" in result.stderr.str()


def test_valid_profile_without_a_store_leaves_the_plugin_idle(stores: pytest.Pytester) -> None:
    stores.makepyfile(test_own="def test_own():\n    assert True\n")
    result = run(stores, "--chongming-profile=quick", "test_own.py")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    result.assert_outcomes(passed=1)


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
