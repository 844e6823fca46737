"""The StreamletApplication custom resource definition: where its file is, and its schema.

The one copy of the CRD is the Helm chart's (`charts/streamlets-operator/crds/`); the package
carries it through a symlink (`blueprint/crds/`), so an installed wheel has it too.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

GROUP = "streamlets.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "StreamletApplication"
PLURAL = "streamletapplications"
SHORT_NAME = "sapp"
# A command asked of the operator (`kubectl streamlets savepoint|state|control`): JSON with id,
# command, target, args and optionally timeout (the seconds the streamlets have to answer, at most
# REQUEST_TIMEOUT_MAX; the operator's STREAMLETS_COMMAND_TIMEOUT when absent); the operator answers in
# status.commands (operator/streamlets_operator/commands.py), `no-answer` for a streamlet silent that long.
REQUEST_ANNOTATION = f"commands.{GROUP}/request"
REQUEST_TIMEOUT_MAX = 3600.0
# Seconds a requester waits for status.commands beyond the request's timeout: the operator's send
# and its status patch.
RESULT_GRACE_SECONDS = 30.0

_FILE = f"{GROUP}_{PLURAL}.yaml"
_PACKAGE = Path(__file__).resolve().parent.parent  # the blueprint package
# In a checkout: the chart's file. Installed: the package's copy (the symlink, resolved at build).
CRD_PATH = next((p for p in (_PACKAGE.parent / "charts" / "streamlets-operator" / "crds" / _FILE,
                             _PACKAGE / "crds" / _FILE) if p.is_file()),
                _PACKAGE / "crds" / _FILE)


@lru_cache(maxsize=1)
def load_crd() -> dict[str, Any]:
    """The CustomResourceDefinition as a dict (raises OSError if the file is missing)."""
    return yaml.safe_load(CRD_PATH.read_text(encoding="utf-8"))


def openapi_schema(version: str = VERSION) -> dict[str, Any]:
    """The openAPIV3Schema of one served version."""
    for v in load_crd()["spec"]["versions"]:
        if v["name"] == version:
            return v["schema"]["openAPIV3Schema"]
    raise KeyError(f"the CRD has no version {version!r}")
