"""Project test configuration: detailed assertion messages inside the kit's own checks."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite(
    "chongming_conformance.contract",
    "chongming_conformance.properties",
    "chongming_conformance.stateful",
    "chongming_conformance._model",
)
