"""Deprecated alias of ``stress_profiles``, named apart from the hypothesis ``profiles`` module."""

from __future__ import annotations

from .stress_profiles import DEFAULT_PROFILE, PROFILES, StressProfile, get_profile

__all__ = ["DEFAULT_PROFILE", "PROFILES", "StressProfile", "get_profile"]
