"""pytest plugin: ``pytest --chongming-store=MODULE:ATTR`` runs the kit against a store.

Registered through the ``pytest11`` entry point, so installing the package is
enough. Without a configured store it does nothing visible. With one it:

1. resolves the settings once (:mod:`.options`) and the spec at configure time
   (:mod:`.spec`: one store is opened and closed), turning every bad setting or
   spec into a one-paragraph usage error (exit 4);
2. appends the packaged suite to pytest's arguments and marks what declarations
   excuse (:mod:`.collection`);
3. turns pytest's reports into plain per-test records (:mod:`.harvest`);
4. hands those to :mod:`chongming_conformance.report`, which decides every
   outcome, the gate and the verdict, and renders the reports (:mod:`.run`
   only writes them).

Each hook here is a few lines; the logic lives in the modules named above.
See docs/plugin.md for the options and the report schema.

The part ``plugin`` (docs/architecture.md, "The parts") is the top layer: it may import
every other part, and none imports it.
"""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite(
    "chongming_conformance.checking.contract",
    "chongming_conformance.checking.properties",
    "chongming_conformance.checking.stateful",
    "chongming_conformance.oracle",
    "chongming_conformance.stress",
)

# Imported after register_assert_rewrite on purpose: none of these is rewritten,
# and none imports the modules above.
from ..checking.hypothesis_profiles import force_seed  # noqa: E402
from ..report import masked_logging  # noqa: E402
from ..suite import _config  # noqa: E402
from .draws import import_kit_modules  # noqa: E402
from .options import add_options, load_profile, read_options  # noqa: E402
from .run import ConformanceRun  # noqa: E402
from .signals import sigterm_as_interrupt  # noqa: E402
from .spec import resolve_kit, resolve_spec  # noqa: E402

__all__ = ["resolve_spec"]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    options = read_options(config)
    if options is None:
        return
    # Before the store is first opened: a driver may log its DSN while connecting.
    config.add_cleanup(masked_logging())
    kit, described = resolve_kit(options)
    load_profile(options.profile, shrink=options.shrink)
    import_kit_modules()  # derandomized draws must not depend on test order (draws.py)
    if options.seed is not None and config.getoption("hypothesis_seed", None) is None:
        # One seed for the whole run; xdist workers get it through the option values.
        config.option.hypothesis_seed = options.seed
        force_seed(options.seed)
    _config.install(kit)
    ConformanceRun(config, options, kit, described).register()
    config.add_cleanup(sigterm_as_interrupt())


def pytest_unconfigure(config: pytest.Config) -> None:
    _config.uninstall()
