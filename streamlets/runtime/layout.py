"""Where streamlets keep their state: the folders of one state folder, named in one place.

The sandbox's state folder (`blueprint run`; `StateLayout(state_dir)`, by default
`.streamlets/<app id>` in the current folder):

    checkpoints/<app>/<streamlet>/<query>   Spark's query checkpoints (streamlets.runtime.checkpoint)
    savepoints/                             savepoints (streamlets.state.savepoint)
    dumps/                                  dump-state exports (streamlets.state.export)
    volumes/<streamlet>/<mount>             volume mounts the local config does not map
    logs/<streamlet>.log, spark.log, sandbox.log
    kafka/                                  the embedded broker's data
    sandbox.json                            the running sandbox: its broker and web view
    sandbox.lock                            the folder's owner (blueprint.sandbox.statelock)

A cluster's checkpoint claim (the operator mounts it at /checkpoints; `StateLayout("/checkpoints",
checkpoint_folder="")`) keeps the same folders but for `checkpoints`: a streamlet's checkpoints
are `<app>/<streamlet>` at its root. A run config's defaults (StreamletRunConfig.savepoints,
.state_dumps) and the runner's file transport follow this layout around its checkpoint root
(`StateLayout.of_checkpoint_root`).

The test kit's work folder (streamlets.testkit) is `StateLayout(workdir)` with its one streamlet's
checkpoints in `checkpoints/` and its topics, files of the file transport, in `topics/`.

Paths are strings, local paths or Hadoop URIs (s3a://, abfss://...): parts are joined with "/".
A root of "" gives paths relative to the state folder (a volume's subPath in the claim).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SANDBOX_STATE_FOLDERS = ".streamlets"  # the sandbox's state folders, `<this>/<app id>` in the current folder
LOCK_FILE = "sandbox.lock"  # a state folder's owner (blueprint.sandbox.statelock)


@dataclass(frozen=True)
class StateLayout:
    """One state folder and where each kind of state lives in it.

    root: the folder (a local path or Hadoop URI; "" for paths relative to it);
    checkpoint_folder: the folder under `root` that holds `<app>/<streamlet>` checkpoint roots,
    `checkpoints` in the sandbox, "" on a cluster's checkpoint claim (its root)."""

    root: str
    checkpoint_folder: str = "checkpoints"

    @classmethod
    def sandbox_default(cls, app_id: str) -> "StateLayout":
        """The sandbox's state folder when none is given: `.streamlets/<app id>` in the current
        folder, absolute."""
        return cls(str((Path.cwd() / SANDBOX_STATE_FOLDERS / app_id).resolve()))

    @classmethod
    def of_checkpoint_root(cls, checkpoint_root: str) -> "StateLayout":
        """The claim layout (checkpoints at the root) whose `checkpoints(app, streamlet)` is
        `checkpoint_root`, a streamlet's checkpoint root `<root>/<app>/<streamlet>`: its root
        is `checkpoint_root` less its last two parts."""
        return cls(checkpoint_root.rstrip("/").rsplit("/", 2)[0], checkpoint_folder="")

    def path(self, *parts: str) -> str:
        """`root/part/...`, empty parts (and an empty root) left out."""
        return "/".join([p.strip("/") if i else p.rstrip("/") for i, p in enumerate((self.root, *parts)) if p])

    def checkpoints(self, app_id: str | None = None, streamlet: str | None = None) -> str:
        """A streamlet's checkpoint root, `checkpoints/<app>/<streamlet>` (one folder per query
        below it: StreamletRunConfig.checkpoint_location); without a streamlet the application's
        folder; without either the folder of every application's."""
        return self.path(self.checkpoint_folder, app_id or "", streamlet or "")

    @property
    def savepoints(self) -> str:
        """The savepoint root, `savepoints` (each savepoint a folder below it)."""
        return self.path("savepoints")

    @property
    def dumps(self) -> str:
        """Where dump-state commands write, `dumps`."""
        return self.path("dumps")

    def volume(self, streamlet: str, mount: str) -> str:
        """The folder of a streamlet's volume mount that nothing else provides,
        `volumes/<streamlet>/<mount>`."""
        return self.path("volumes", streamlet, mount)

    @property
    def topics(self) -> str:
        """The file transport's topics (a folder per topic) of runs without Kafka, `topics`."""
        return self.path("topics")

    @property
    def logs(self) -> str:
        """The sandbox's log folder, `logs`."""
        return self.path("logs")

    def log(self, name: str) -> str:
        """A log file in `logs`: `<streamlet>.log`, or `spark.log` and `sandbox.log` (name
        `spark`, `sandbox`)."""
        return self.path("logs", f"{name}.log")

    @property
    def kafka(self) -> str:
        """The sandbox's embedded Kafka broker's folder, `kafka`."""
        return self.path("kafka")

    @property
    def sandbox_info(self) -> str:
        """`sandbox.json`, written while a sandbox runs: {app_id, bootstrap_servers, pid, ui}
        (`blueprint control` finds the broker there)."""
        return self.path("sandbox.json")

    @property
    def lock_file(self) -> str:
        """`sandbox.lock`, the folder's owner (blueprint.sandbox.statelock)."""
        return self.path(LOCK_FILE)
