"""Where downloads are cached: one folder that CI and later runs reuse."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """$STREAMLETS_CACHE or ~/.cache/streamlets: Kafka broker jars, Spark's connector jars."""
    env = os.environ.get("STREAMLETS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "streamlets"
