"""Stress tests: make the helper modules importable by spawned workers.

The directory is put on ``sys.path`` explicitly (not only by pytest's rootdir
insertion) because spawned workers inherit the parent's ``sys.path`` and must
import ``stress_stores`` by name to unpickle the broken stores' openers.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
