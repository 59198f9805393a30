"""Import every kit module before any check draws, so derandomized draws never depend on
test order.

Hypothesis mixes into the values it generates the constants (strings, numbers) of every
*local* module loaded when a draw happens -- any module in ``sys.modules`` whose file is not
under ``site-packages`` (``hypothesis.internal.conjecture.providers._get_local_constants``).
The kit installed editable, a store's own package and the test files are local. So a
derandomized check drew other inputs after some test had lazily imported one more kit module
(a reference store imports ``faults`` only when a stress run asks for it): the gate's
"same inputs every run" held per test order, not per run, and two xdist workers could draw
different inputs for the same check. Importing every kit module at configure time fixes
the kit's share of that pool before the first draw; a store's own lazily imported modules
remain the store's to import up front (docs/plugin.md, "Derandomized draws").
"""

from __future__ import annotations

import importlib
import pkgutil

import chongming_conformance

__all__ = ["import_kit_modules"]

#: Not imported: ``__main__`` modules run a command; the packaged suite's test files are
#: pytest's to import (it collects them before any test runs, so their constants are in
#: the pool before the first draw anyway).
_SKIP = ("__main__", "chongming_conformance.suite.test_")


def import_kit_modules() -> list[str]:
    """Import every module of the kit (see the module docstring); the names imported."""
    names: list[str] = []
    for info in pkgutil.walk_packages(chongming_conformance.__path__, "chongming_conformance."):
        if info.name.endswith(_SKIP[0]) or info.name.startswith(_SKIP[1]):
            continue
        importlib.import_module(info.name)
        names.append(info.name)
    return names
