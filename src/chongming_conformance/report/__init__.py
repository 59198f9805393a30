"""The conformance report: per-clause outcomes from plain test records, as JSON, Markdown or text.

This package owns the document end to end, and nothing in it imports pytest:

* :mod:`.records` -- the plain per-test and per-clause records (:class:`TestResult`,
  :class:`ClauseResult`, :class:`SuiteRecords`) and the outcome names;
* :mod:`.outcomes` -- per-clause evaluation, blame narrowing, partial runs, the gate
  and the verdict (:func:`assess`); the outcome rules are in its docstring;
* :mod:`.blames` -- reading ``chongming-blame:`` notes out of failure text;
* :mod:`.document` -- the JSON document, declared once; :data:`REPORT_SCHEMA` is
  derived from the same declaration (:mod:`.schema`), and :func:`validate_report`
  checks a document against it without any dependency;
* :mod:`.terminal`, :mod:`.markdown`, :mod:`.catalogue` -- renderers;
* :mod:`.masking` -- every string that goes into a document passes through
  :func:`mask_secrets`.

The part ``report`` (docs/architecture.md, "The parts") may import ``oracle`` (the blame
note's format), ``protocol`` and the kit's ``__version__``; the plugin, the commands, the
stress command and the attestation all render through it.
"""

from __future__ import annotations

# The public face: every submodule's __all__, re-exported (each list is kept in one place).
from . import blames, catalogue, document, markdown, masking, outcomes, records, terminal
from .blames import *  # noqa: F403
from .catalogue import *  # noqa: F403
from .document import *  # noqa: F403
from .markdown import *  # noqa: F403
from .masking import *  # noqa: F403
from .outcomes import *  # noqa: F403
from .records import *  # noqa: F403
from .terminal import *  # noqa: F403

__all__ = [
    *blames.__all__,
    *catalogue.__all__,
    *document.__all__,
    *markdown.__all__,
    *masking.__all__,
    *outcomes.__all__,
    *records.__all__,
    *terminal.__all__,
]
