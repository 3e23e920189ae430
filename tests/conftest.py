"""Shared test settings."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# `HYPOTHESIS_PROFILE=deep pytest tests/accounting` runs the fuzzers ten times longer.
settings.register_profile(
    "default", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "deep", max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
