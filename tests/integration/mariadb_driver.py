"""The MariaDB store's modules for the MariaDB evidence files, or a skip that says why.

PyMySQL is an optional extra (``chongming-conformance[mariadb]``). Without it each
MariaDB evidence module is skipped with the install command, once, here; under
``CHONGMING_REQUIRE_MARIADB=1`` (set by ``.ci/run``) the ImportError is raised instead,
so CI can never go green without the MariaDB evidence.
"""

from __future__ import annotations

import os

import pytest

try:
    import pymysql

    from reference_stores import mariadb as mstore
    from reference_stores import mariadb_schema as mschema
except ImportError as exc:  # the driver is an optional extra
    if os.environ.get("CHONGMING_REQUIRE_MARIADB", "").strip() not in ("", "0"):
        raise
    pytest.skip(
        f'PyMySQL is not installed ({exc}): pip install "chongming-conformance[mariadb]"',
        allow_module_level=True,
    )

__all__ = ["mschema", "mstore", "pymysql"]
