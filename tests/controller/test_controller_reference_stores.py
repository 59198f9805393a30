"""Every reference store passes the controller checks, in one process and across processes.

The memory and JSON-file stores run the in-process checks only (they cannot be shared
between processes, docs/reference-stores.md); the JSON-file store's cross-process limit
stays pinned by the stress harness (tests/stress).
"""

from __future__ import annotations

from typing import Any

import pytest

from chongming_conformance.checking.controller import ControllerContract
from reference_stores import jsonfile, memory, sqlite


class OneProcessOnly(ControllerContract):
    """The memory and JSON-file stores cannot be shared: their XP-CTRL checks are not
    generated at all (not skipped: a skip would read as "could not check")."""


for _name in [n for n in vars(ControllerContract) if n.startswith("test_xp_ctrl_")]:
    setattr(OneProcessOnly, _name, None)  # pytest collects only callables


class TestMemoryStoreUnderAController(OneProcessOnly):
    def make_store(self) -> Any:
        return memory.make_store()


class TestSqliteStoreUnderAController(ControllerContract):
    def make_store(self) -> Any:
        return sqlite.make_store()

    def make_shared_store(self) -> Any:
        return sqlite.make_shared_store()


class TestJsonFileStoreUnderAController(OneProcessOnly):
    def make_store(self) -> Any:
        return jsonfile.make_store()


@pytest.mark.postgres
@pytest.mark.usefixtures("postgres_dsn")
class TestPostgresStoreUnderAController(ControllerContract):
    def make_store(self) -> Any:
        from reference_stores import postgres

        return postgres.make_store()

    def make_shared_store(self) -> Any:
        from reference_stores import postgres

        return postgres.make_shared_store()
