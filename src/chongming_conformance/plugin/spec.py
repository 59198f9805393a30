"""Resolving ``MODULE:ATTR`` specs into a checked kit configuration: one paragraph per mistake.

At configure time the store spec is imported, its capability declaration read,
one store opened and closed, and the shared-store factory (given, or found as
``make_shared_store`` next to the store factory) set up once and its opener
tried. Every way this can go wrong becomes a :class:`pytest.UsageError` (exit
4) that names the setting, the spec and the fix -- never a traceback from inside
the kit. The checks themselves live in :mod:`chongming_conformance.seam.specs`
(shared with ``chongming-conformance bench``); this module turns their masked
:class:`~chongming_conformance.seam.specs.SpecError` into pytest's usage error.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ..faults.deployment import DeploymentError, find_deployment
from ..protocol.capabilities import Capabilities, CapabilityError, declared_capabilities
from ..report import mask_secrets
from ..seam import specs
from ..seam.reuse import RESET_ATTR
from ..seam.specs import SpecError
from ..seam.timeouts import DEFAULT_TIMEOUT
from ..suite._config import KitConfig
from .options import SHARED_ATTR, Options

__all__ = ["resolve_kit", "resolve_spec"]


def _usage(message: str) -> pytest.UsageError:
    """The one way this module reports a mistake: a masked usage error (exit 4)."""
    return pytest.UsageError(mask_secrets(message))


def resolve_spec(
    spec: str, where: str, invocation_dir: Path, timeout: float = DEFAULT_TIMEOUT
) -> tuple[Callable[[], Any], ModuleType, str]:
    """``MODULE:ATTR`` -> (callable, module, label) or a :class:`pytest.UsageError`.

    :func:`chongming_conformance.seam.specs.resolve_spec` with the plugin's error type.
    """
    try:
        return specs.resolve_spec(spec, where, invocation_dir, timeout)
    except SpecError as exc:
        raise pytest.UsageError(str(exc)) from None


def _shared_factory(
    options: Options, module: ModuleType, caps: Capabilities
) -> tuple[Callable[[], Any] | None, str | None, str | None, ModuleType | None]:
    """(factory, spec, source, module) of the shared store: given, found next to the store,
    or none."""
    if options.shared_spec:
        if "cross_process" in caps.unsupported:
            raise _usage(
                f"{options.shared_source}={options.shared_spec!r} is given, but {caps.origin} "
                "declares cross_process unsupported; drop one of the two."
            )
        factory, shared_module, spec = resolve_spec(
            options.shared_spec, options.shared_source, options.invocation_dir, options.timeout
        )
        return factory, spec, options.shared_source, shared_module
    if "cross_process" not in caps.unsupported and callable(getattr(module, SHARED_ATTR, None)):
        return (
            getattr(module, SHARED_ATTR),
            f"{module.__name__}:{SHARED_ATTR}",
            f"found {SHARED_ATTR} in {module.__name__}",
            module,
        )
    return None, None, None, None


def _reset(
    options: Options, module: ModuleType
) -> tuple[Callable[[Any], None] | None, str | None]:
    """(reset_store, its spec) found next to the store factory, or (None, None)."""
    reset = getattr(module, RESET_ATTR, None)
    if options.no_reuse or reset is None:
        return None, None
    spec = f"{module.__name__}:{RESET_ATTR}"
    if not callable(reset):
        raise _usage(
            f"{spec} is a {type(reset).__name__}, not callable: reset_store(store) must "
            "empty the store it is given (or remove the name to open a new store per test)."
        )
    return reset, spec


def resolve_kit(options: Options) -> tuple[KitConfig, str]:
    """The checked :class:`KitConfig` and the opened store's masked ``type\\nrepr``."""
    spec, source = options.store_spec, options.store_source
    factory, module, label = resolve_spec(spec, source, options.invocation_dir, options.timeout)
    try:
        caps = declared_capabilities(factory, module, label)
    except CapabilityError as exc:
        raise _usage(f"{source}={spec!r}: {exc}.") from None
    try:
        described = specs.open_check(factory, spec, source, options.timeout)
    except SpecError as exc:
        raise pytest.UsageError(str(exc)) from None
    reset, reset_spec = _reset(options, module)
    if reset is not None:
        assert reset_spec is not None
        try:
            specs.check_reset(factory, reset, reset_spec, f"found {RESET_ATTR} in "
                              f"{module.__name__}", options.timeout)
        except SpecError as exc:
            raise pytest.UsageError(str(exc)) from None
    shared_factory, shared_spec, shared_source, shared_module = _shared_factory(
        options, module, caps)
    deployment = None
    if shared_factory is not None:
        try:
            deployment = find_deployment(shared_module)
        except DeploymentError as exc:
            raise _usage(f"{shared_source}: {exc}.") from None
    if shared_factory is not None and options.scope != "single":
        assert shared_spec is not None and shared_source is not None
        try:
            specs.check_shared(shared_factory, shared_spec, shared_source, options.timeout)
        except SpecError as exc:
            raise pytest.UsageError(str(exc)) from None
    kit = KitConfig(
        store_spec=label,
        store_factory=factory,
        store_source=source,
        shared_spec=shared_spec,
        shared_factory=shared_factory,
        shared_source=shared_source,
        timeout=options.timeout,
        capabilities=caps,
        profile=options.profile,
        stress_profile=options.stress_profile,
        reset_store=reset,
        reset_spec=reset_spec,
        deployment=deployment,
    )
    return kit, described
