"""Volume mounts: named paths a streamlet expects a volume at (a PVC in a cluster, a folder locally)."""

from __future__ import annotations

from typing import Literal

AccessMode = Literal["ReadWriteMany", "ReadOnlyMany", "ReadWriteOnce", "ReadWriteOncePod"]
# Kubernetes' access modes of a PersistentVolume (ReadWriteOncePod: stable since Kubernetes 1.29).
ACCESS_MODES: tuple[str, ...] = ("ReadWriteMany", "ReadOnlyMany", "ReadWriteOnce", "ReadWriteOncePod")


class VolumeMount:
    """A volume the streamlet needs: `name` (DNS label), absolute `path` in the container, and
    the Kubernetes `access_mode` (ACCESS_MODES; a ReadWriteOncePod claim is mounted in the
    driver pod only, as one pod may use it, not in the executors). In the local sandbox the path maps to a folder under the state
    root (or one given in the run config: `streamlets.<name>.volume-mounts.<mount> = /some/dir`).
    """

    def __init__(self, name: str, path: str, access_mode: AccessMode = "ReadWriteMany") -> None:
        self.name = name
        self.path = path
        self.access_mode = access_mode

    @property
    def read_only(self) -> bool:
        """Whether the mount is ReadOnlyMany: the streamlet's input (mounted read-only in pods; in
        the sandbox, a folder that must exist before the start)."""
        return self.access_mode == "ReadOnlyMany"

    def __repr__(self) -> str:
        return f"VolumeMount({self.name!r}, {self.path!r}, {self.access_mode!r})"
