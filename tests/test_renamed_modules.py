"""Modules renamed for clarity stay importable under their old names, as the same objects.

``profiles`` -> ``hypothesis_profiles`` (told apart from the stress load
profiles), ``_model`` -> ``oracle`` (told apart from ``model``, the data),
``_checks`` -> ``assertions``. The old names must give the *same* module, so
state such as a loaded profile is shared whichever name a caller used.
"""

from __future__ import annotations

import importlib
import sys

import pytest

import chongming_conformance.assertions
import chongming_conformance.hypothesis_profiles
import chongming_conformance.oracle

RENAMED = [
    pytest.param("profiles", chongming_conformance.hypothesis_profiles, False, id="profiles"),
    pytest.param("_model", chongming_conformance.oracle, True, id="_model"),
    pytest.param("_checks", chongming_conformance.assertions, True, id="_checks"),
]


@pytest.mark.parametrize(("old", "new", "deprecated"), RENAMED)
def test_old_name_is_the_new_module(old: str, new: object, deprecated: bool,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"chongming_conformance.{old}"
    monkeypatch.delitem(sys.modules, name, raising=False)
    if deprecated:
        with pytest.warns(DeprecationWarning, match=name.replace(".", r"\.")):
            module = importlib.import_module(name)
    else:
        module = importlib.import_module(name)
    assert module is new
    assert sys.modules[name] is new


def test_old_names_export_what_their_users_import() -> None:
    from chongming_conformance.profiles import PROFILES, active_settings, load_profile

    assert PROFILES["ci"] == "chongming-ci"
    assert callable(active_settings) and callable(load_profile)
