"""Secret masking: every string that leaves the kit (report, terminal, pytest output) passes here.

Stores are configured with DSNs and tokens; a conformance report is meant to be
pasted into a pull request, and a usage error into an issue, so passwords are
replaced before anything is written. This module is the one place that knows
what a secret looks like (docs/security.md lists the forms and the exit paths
that call it):

* URL userinfo: ``scheme://user:SECRET@host`` -- the password may hold any
  character but whitespace and quotes, ``/``, ``:`` and ``@`` included (the
  password runs to the last ``@`` of the URL, which over-masks a path holding
  ``@`` rather than under-mask a password holding one);
* key=value and environment forms: ``password=SECRET``, ``sslpassword=…``,
  ``PGPASSWORD=…``, ``db_password: …``, quoted values with backslash escapes;
* JSON and Python-dict keys: ``"password": "SECRET"``, ``'api_token': '…'``;
* the same forms cut by pytest's shortened reprs (``pas...sword": "SECRET"``,
  ``...dit:SECRET@host``): right after ``...``, a value following ``:``/``=``
  and userinfo ending in ``@`` are masked.

Over-masking is accepted on purpose: a masked ``max_tokens=5`` costs a reader
nothing, a leaked password costs a rotation.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MASK", "mask_all", "mask_secrets", "masked_logging"]

#: What a secret is replaced with.
MASK = "***"

# A word naming a secret: password, PGPASSWORD, sslpassword, db_passwd, api_token, client_secret.
_SECRET_WORD = r"[A-Za-z0-9_\-]*(?:password|passwd|passphrase|pwd|secret|token)[A-Za-z0-9_]*"

_URL_PASSWORD = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s'\"]*):(?P<pw>[^\s'\"]*)@"
)
_QUOTED_KEY = re.compile(
    rf"(?P<key>(?P<q>[\"']){_SECRET_WORD}(?P=q)\s*[:=]\s*)"
    r"(?P<value>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^\s,}\]]+)",
    re.IGNORECASE,
)
# pytest shortens long reprs in tracebacks (``saferepr``: head, ``...``, tail), which can cut
# a secret's key or a URL's scheme off while keeping the secret. Right after such a cut,
# anything shaped like "key ends, then a value" or "userinfo ends with @" is masked.
_CUT_KEY = re.compile(
    r"(?P<key>\.\.\.[A-Za-z0-9_\-]*[\"']?\s*[:=]\s*)"
    r"(?P<value>\"(?:[^\"\\]|\\.)*\"?|'(?:[^'\\]|\\.)*'?|[^\s'\"]+)"
)
_CUT_USERINFO = re.compile(r"\.\.\.[^\s'\"]*@")
_KV = re.compile(
    rf"(?P<key>(?<![A-Za-z0-9_]){_SECRET_WORD}\s*[=:]\s*)"
    r"(?P<value>\"(?:[^\"\\]|\\.)*\"?|'(?:[^'\\]|\\.)*'?|[^\s'\"]+)",
    re.IGNORECASE,
)


def _quoted_mask(value: str) -> str:
    """``***`` keeping the value's quotes, so masked JSON or a masked repr stays well formed."""
    if len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]:
        return value[0] + MASK + value[0]
    return MASK


def mask_secrets(text: str) -> str:
    """``text`` with every password, token or secret in a form listed above replaced by ``***``."""
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}:{MASK}@", text)
    text = _CUT_USERINFO.sub(f"...{MASK}@", text)
    text = _CUT_KEY.sub(lambda m: m.group("key") + _quoted_mask(m.group("value")), text)
    text = _QUOTED_KEY.sub(lambda m: m.group("key") + _quoted_mask(m.group("value")), text)
    return _KV.sub(
        lambda m: m.group("key")
        + (m.group("value") if m.group("value").startswith(MASK) else _quoted_mask(
            m.group("value"))),
        text,
    )


def _secret_key(key: object) -> bool:
    return isinstance(key, str) and re.fullmatch(_SECRET_WORD, key, re.IGNORECASE) is not None


def mask_all(value: Any) -> Any:
    """``mask_secrets`` applied to every string inside a JSON-like value.

    The value under a key that names a secret (``{"password": ...}``) is replaced
    whole, whatever its type.
    """
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, Mapping):
        return {k: MASK if _secret_key(k) else mask_all(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_all(v) for v in value]
    return value


def masked_logging() -> Callable[[], None]:
    """Mask every log record from now on, whoever logs it and whichever handler prints it.

    A driver's own logger is an exit path the kit does not own: psycopg_pool, for one,
    warns ``error connecting in 'pool': missing "=" after "postgresql://user:SECRET@…"``
    while the plugin opens the store, before pytest captures anything, and Python's
    last-resort handler prints it to stderr. Handlers come and go (pytest adds its own
    per test phase), so the mask goes where every record is born: the log record
    factory formats the message once, masks it, and keeps the masked text (a
    traceback attached to the record likewise). Only records that pass their
    logger's level are built, so silent loggers cost nothing.

    Returns the function that restores the previous factory.
    """
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: the handler reports it, as it would
            return record
        record.msg, record.args = mask_secrets(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = mask_secrets(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = mask_secrets(record.stack_info)
        return record

    logging.setLogRecordFactory(factory)

    def restore() -> None:
        if logging.getLogRecordFactory() is factory:
            logging.setLogRecordFactory(previous)

    return restore
