"""Old name of :mod:`chongming_conformance.hypothesis_profiles`, kept so existing imports work.

Renamed so the hypothesis settings profiles are not confused with the stress
harness's load profiles (``chongming_conformance.stress.stress_profiles``). This module
*is* the new one: importing it gives the very same module object, so loading a
profile through either name changes the same state.
"""

from __future__ import annotations

from . import hypothesis_profiles as _new
from ._renamed import alias_module
from .hypothesis_profiles import *  # noqa: F403  (the names, for type checkers)
from .hypothesis_profiles import __all__ as __all__

alias_module(__name__, _new, deprecated=False)
