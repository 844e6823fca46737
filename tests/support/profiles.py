"""Hypothesis profiles: "ci" keeps every property test's example count, "dev" runs a tenth of it
so that everyday runs of the unit tier stay quick.

The profile is chosen by ``$HYPOTHESIS_PROFILE`` (default "dev"; .ci/run sets "ci"), or by
Hypothesis's own ``pytest --hypothesis-profile=NAME``. tests/conftest.py calls :func:`load`.
Tests that need more (or fewer) examples than Hypothesis's default 100 say so with
``@settings(max_examples=examples(N))``: N under "ci", scaled like the default under "dev".
"""

from __future__ import annotations

import os

from hypothesis import settings

ENV = "HYPOTHESIS_PROFILE"
CI, DEV = "ci", "dev"
CI_EXAMPLES = 100  # Hypothesis's default max_examples: what the "ci" profile keeps
DEV_EXAMPLES = 10  # "dev": a tenth


def load() -> str:
    """Register "ci" (the settings Hypothesis loaded at import: its defaults, or its own "ci"
    profile on a CI service) and "dev" (the same with DEV_EXAMPLES), load the one $HYPOTHESIS_PROFILE
    names (default "dev") and return its name; an unknown name raises Hypothesis's
    InvalidArgument naming the registered profiles."""
    today = settings.default
    assert today is not None and today.max_examples == CI_EXAMPLES, today
    settings.register_profile(CI, today)
    settings.register_profile(DEV, today, max_examples=DEV_EXAMPLES)
    name = os.environ.get(ENV) or DEV
    settings.load_profile(name)
    return name


def examples(ci: int) -> int:
    """A test's max_examples: `ci` under the "ci" profile, scaled by the loaded profile's share of
    CI_EXAMPLES otherwise (at least 1). Read when the test module is imported, after the profile
    is loaded (tests/conftest.py, or pytest's --hypothesis-profile)."""
    current = settings.default
    assert current is not None
    return max(1, ci * current.max_examples // CI_EXAMPLES)
