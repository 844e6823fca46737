"""Checkpoints on an object store: the settings of the state root, declared once.

Everything the runtime keeps under a checkpoint root (Spark's checkpoints, savepoints, the
quarantine and dead-letter ledgers, state exports: streamlets.runtime.layout) can live on S3
through Hadoop's S3A connector, `s3a://bucket/prefix`. The sandbox reads these settings from the
`storage` section of its run config (blueprint.sandbox.localconfig):

    storage {
      checkpoints = "s3a://streamlets/flight-delays"   # the state root (a local folder too)
      s3a.endpoint = "http://127.0.0.1:9000"           # default: AWS's endpoint for the region
      s3a.path-style-access = true                     # bucket in the path (MinIO), not the host
      s3a.region = "us-east-1"
      s3a.credentials-file = "~/.aws/credentials"      # default: $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY
      s3a.profile = "default"                          # the file's profile
    }

Credentials never sit in a config, a Spark setting or a log line: S3A takes them from the AWS
SDK's own providers (`fs.s3a.aws.credentials.provider`), the environment variables
$AWS_ACCESS_KEY_ID / $AWS_SECRET_ACCESS_KEY (and $AWS_SESSION_TOKEN), or an AWS shared
credentials file named by $AWS_SHARED_CREDENTIALS_FILE ($AWS_PROFILE its profile), which
`environment()` sets for the JVM a session starts. The connector's jars: spark_session.s3a_packages.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from .layout import StateLayout

STORAGE = "storage"  # the run config's section
S3A_SCHEME = "s3a://"

# The AWS SDK's environment variables (its EnvironmentVariableCredentialsProvider and profile files)
ACCESS_KEY_ENV = "AWS_ACCESS_KEY_ID"
SECRET_KEY_ENV = "AWS_SECRET_ACCESS_KEY"
SESSION_TOKEN_ENV = "AWS_SESSION_TOKEN"
CREDENTIALS_FILE_ENV = "AWS_SHARED_CREDENTIALS_FILE"
PROFILE_ENV = "AWS_PROFILE"
# S3A's credential providers (AWS SDK v2 classes, which Hadoop 3.4+ instantiates by their create())
ENVIRONMENT_PROVIDER = "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
PROFILE_PROVIDER = "software.amazon.awssdk.auth.credentials.ProfileCredentialsProvider"
DEFAULT_REGION = "us-east-1"  # S3-compatible stores (MinIO) answer any region; the SDK needs one
# S3A's input stream (`fs.s3a.input.stream.type`). Hadoop 3.5's default is the Analytics Accelerator
# Library's stream, which caches each object's metadata (its ETag) in the JVM and does not see an
# overwrite: the next read of that object asks for the old ETag and S3 answers 412 Precondition
# Failed (awslabs/analytics-accelerator-s3#218). A checkpoint's files are overwritten in place (a
# replayed batch's state files, the offset log entries the runtime pins: runtime.checkpoint), so
# the state uses the classic stream, which asks S3 for the current ETag on each open and still
# checks it during the read (`fs.s3a.change.detection.*`, on).
INPUT_STREAM = "classic"


class StorageConfigError(ValueError):
    """A `storage.*` setting is unknown or malformed; the message names the key."""


@dataclass(frozen=True)
class ObjectStore:
    """Where the state lives and how to reach it. Each field is the run config key in its
    metadata (`storage.<key>`).

    checkpoints: the state root, `s3a://bucket/prefix` or a local folder; endpoint: the S3 API's
    URL (`http://host:port`: its scheme decides TLS), None for AWS's; path_style_access: the
    bucket in the URL's path (MinIO and most S3-compatible stores), not its host name; region:
    the signing region (default us-east-1 with an endpoint); credentials_file / profile: an AWS
    shared credentials file and its profile, None for the environment variables."""

    checkpoints: str = field(metadata={"key": "checkpoints", "doc": "the state root: s3a://bucket/prefix or a folder"})
    endpoint: str | None = field(default=None, metadata={"key": "s3a.endpoint",
                                                         "doc": "the S3 endpoint URL, http:// or https://"})
    path_style_access: bool = field(default=False, metadata={"key": "s3a.path-style-access",
                                                             "doc": "bucket in the path (MinIO), true or false"})
    region: str | None = field(default=None, metadata={"key": "s3a.region", "doc": "the signing region"})
    credentials_file: str | None = field(default=None, metadata={"key": "s3a.credentials-file",
                                                                 "doc": "an AWS shared credentials file"})
    profile: str | None = field(default=None, metadata={"key": "s3a.profile", "doc": "the credentials file's profile"})

    @property
    def is_s3a(self) -> bool:
        """Whether the state root is on S3 (`s3a://`): the S3A connector is needed."""
        return self.checkpoints.startswith(S3A_SCHEME)

    def layout(self) -> StateLayout:
        """The layout of the state root (`checkpoints/`, `savepoints/`, `dumps/` below it)."""
        return StateLayout(self.checkpoints.rstrip("/"))

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings (`spark.hadoop.fs.s3a.*`) that reach the store; no credential among
        them, only the provider that reads it. {} for a local root."""
        if not self.is_s3a:
            return {}
        pre = "spark.hadoop.fs.s3a."
        conf = {f"{pre}aws.credentials.provider": PROFILE_PROVIDER if self.credentials_file else ENVIRONMENT_PROVIDER,
                f"{pre}input.stream.type": INPUT_STREAM}
        if self.endpoint:
            conf[f"{pre}endpoint"] = self.endpoint
            conf[f"{pre}connection.ssl.enabled"] = str(not self.endpoint.startswith("http://")).lower()
        region = self.region or (DEFAULT_REGION if self.endpoint else None)
        if region:
            conf[f"{pre}endpoint.region"] = region
        if self.path_style_access:
            conf[f"{pre}path.style.access"] = "true"
        return conf

    def environment(self) -> dict[str, str]:
        """Environment variables the JVM needs for the credentials file (set before it starts);
        {} when the credentials come from the environment already."""
        env = {}
        if self.credentials_file:
            env[CREDENTIALS_FILE_ENV] = str(Path(self.credentials_file).expanduser().resolve())
        if self.profile:
            env[PROFILE_ENV] = self.profile
        return env

    def missing_credentials(self, env: Mapping[str, str] | None = None) -> str | None:
        """What is missing to reach an s3a:// root, in one sentence naming the variables or the
        file; None when nothing is (or the root is local)."""
        if not self.is_s3a:
            return None
        if self.credentials_file:
            path = Path(self.credentials_file).expanduser()
            return None if path.is_file() else f"storage.s3a.credentials-file: {path} does not exist"
        env = os.environ if env is None else env
        missing = [v for v in (ACCESS_KEY_ENV, SECRET_KEY_ENV) if not env.get(v)]
        return (f"the checkpoint root {self.checkpoints} needs S3 credentials: set {' and '.join(missing)} "
                f"(or storage.s3a.credentials-file)") if missing else None


STORAGE_KEYS: dict[str, str] = {f.metadata["key"]: f.name for f in fields(ObjectStore)}  # run config key -> field
PATH_KEYS = ("checkpoints", "s3a.credentials-file")  # a relative local path: against its config file's folder


def storage_doc() -> str:
    """One line per `storage.*` key and what it takes, for error messages."""
    return "; ".join(f"{STORAGE}.{f.metadata['key']} ({f.metadata['doc']})" for f in fields(ObjectStore))


def object_store(values: Mapping[str, Any], base: Path | None = None) -> ObjectStore | None:
    """The ObjectStore of the `storage.*` settings `values` (key without `storage.` -> value),
    None when there are none. A relative local root or credentials file resolves against `base`
    (the config file's folder; default the current one). Raises StorageConfigError naming the
    key for an unknown key, a missing `checkpoints`, a scheme other than s3a:// or a path, or a
    path-style-access that is not true or false."""
    if not values:
        return None
    unknown = sorted(set(values) - set(STORAGE_KEYS))
    if unknown:
        raise StorageConfigError(f"{STORAGE}.{unknown[0]}: unknown setting; the storage settings are {storage_doc()}")
    if "checkpoints" not in values:
        raise StorageConfigError(f"{STORAGE}.checkpoints is missing: the state root, s3a://bucket/prefix or a folder")
    kw: dict[str, Any] = {STORAGE_KEYS[k]: v for k, v in values.items()}
    root = str(kw["checkpoints"]).strip()
    if "://" in root and not root.startswith(S3A_SCHEME) and not root.startswith("file:"):
        raise StorageConfigError(f"{STORAGE}.checkpoints: {root!r} is neither s3a://bucket/prefix nor a folder")
    if root.startswith(S3A_SCHEME) and len(root) <= len(S3A_SCHEME):
        raise StorageConfigError(f"{STORAGE}.checkpoints: {root!r} names no bucket")
    base = base or Path.cwd()
    kw["checkpoints"] = root if "://" in root else str((base / Path(root).expanduser()).resolve())
    psa = kw.get("path_style_access", False)
    if not isinstance(psa, bool):
        if str(psa).lower() not in ("true", "false"):
            raise StorageConfigError(f"{STORAGE}.s3a.path-style-access: {psa!r} is not true or false")
        kw["path_style_access"] = str(psa).lower() == "true"
    if kw.get("credentials_file"):
        kw["credentials_file"] = str((base / Path(str(kw["credentials_file"])).expanduser()).resolve())
    for k in ("endpoint", "region", "profile"):
        if kw.get(k) is not None:
            kw[k] = str(kw[k])
    endpoint = kw.get("endpoint")
    if endpoint and not endpoint.startswith(("http://", "https://")):
        raise StorageConfigError(f"{STORAGE}.s3a.endpoint: {endpoint!r} is no http:// or https:// URL")
    return ObjectStore(**kw)
