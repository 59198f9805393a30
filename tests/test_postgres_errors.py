"""The Postgres store's own mistakes and driver errors: StoreError, with the cause, masked.

None of these needs a server: a malformed DSN fails in libpq, a closed port
refuses at once, and schema names are checked before any connection.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from chongming_conformance import StoreError

pgstore = pytest.importorskip("reference_stores.postgres", reason="psycopg is an optional extra")
psycopg = pytest.importorskip("psycopg")

SECRET = "s3cr" "et/p@ss"  # split: a traceback's source line must not show it whole


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "must not be empty"),
        ("a" * 64, "is 64 bytes; PostgreSQL keeps only the first 63"),
        ("é" * 32, "is 64 bytes"),
        ("nul\x00name", "contains a NUL character"),
    ],
)
def test_bad_schema_names_are_refused_before_connecting(name: str, fragment: str) -> None:
    calls: list[Callable[[], object]] = [
        lambda: pgstore.install_schema("postgresql://nobody@127.0.0.1:1/x", name),
        lambda: pgstore.drop_schema("postgresql://nobody@127.0.0.1:1/x", name),
        lambda: pgstore.PostgresTaskStore("postgresql://nobody@127.0.0.1:1/x", schema=name),
    ]
    for call in calls:
        with pytest.raises(StoreError, match=fragment):
            call()


def test_names_up_to_63_bytes_are_accepted() -> None:
    assert pgstore.validate_schema_name("a" * 63) == "a" * 63
    assert pgstore.validate_schema_name("é" * 31 + "a") == "é" * 31 + "a"


def test_install_schema_with_a_malformed_dsn_is_a_masked_storeerror() -> None:
    # The audit's typo: libpq echoes the whole malformed DSN in its error.
    dsn = f"postgresq://postgres:{SECRET}@db.example/x"
    with pytest.raises(StoreError) as caught:
        pgstore.install_schema(dsn, "chongming_x")
    message = str(caught.value)
    assert message.startswith("install_schema('chongming_x') failed: ProgrammingError")
    assert SECRET not in message and "postgres:***@db.example" in message
    assert isinstance(caught.value.__cause__, psycopg.Error)


def test_a_refused_connection_is_a_masked_storeerror_before_any_pool_retries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dsn = f"host=127.0.0.1 port=1 user=audit password={SECRET} dbname=x connect_timeout=2"
    caplog.set_level("DEBUG", logger="psycopg.pool")
    with pytest.raises(StoreError) as caught:
        pgstore.PostgresTaskStore(dsn, schema="chongming_x", timeout=30.0)
    message = str(caught.value)
    assert message.startswith("cannot connect to PostgreSQL: connection failed")
    assert "Connection refused" in message  # libpq's reason, not "the pool timed out"
    assert SECRET not in message
    # No pool was started: nothing retried in the background, nothing logged each attempt.
    assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg.pool")] == []


def test_a_store_on_a_malformed_dsn_is_refused_at_once_and_the_pool_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Handed to the pool, the typo would be retried in the background for the whole pool
    # timeout, each attempt logging libpq's message with the DSN in it.
    dsn = f"postgresq://postgres:{SECRET}@db.example/x"
    caplog.set_level("DEBUG", logger="psycopg.pool")
    with pytest.raises(StoreError) as caught:
        pgstore.PostgresTaskStore(dsn, schema="chongming_x", timeout=30.0)
    message = str(caught.value)
    assert message.startswith('invalid PostgreSQL DSN: missing "=" after')
    assert SECRET not in message and "postgres:***@db.example" in message
    assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg.pool")] == []
