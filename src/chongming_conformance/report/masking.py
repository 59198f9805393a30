"""Secret masking: every string that leaves the kit (report, terminal, pytest output) passes here.

Stores are configured with DSNs and tokens; a conformance report is meant to be
pasted into a pull request, so passwords are replaced before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["mask_all", "mask_secrets"]

_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s'\"]*):[^@\s'\"/]*@")
_KV_PASSWORD = re.compile(
    r"(?P<key>\b(?:password|passwd|pwd|secret|token)\b\s*[=:]\s*)"
    r"(?P<value>'[^']*'|\"[^\"]*\"|[^\s&;,'\")]+)",
    re.IGNORECASE,
)


def mask_secrets(text: str) -> str:
    """Replace passwords in URLs/DSNs (``scheme://user:***@host``, ``password=***``)."""
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}:***@", text)
    return _KV_PASSWORD.sub(lambda m: f"{m.group('key')}***", text)


def mask_all(value: Any) -> Any:
    """``mask_secrets`` applied to every string inside a JSON-like value."""
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, Mapping):
        return {k: mask_all(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_all(v) for v in value]
    return value
