"""MinIO, a real S3 server, for checkpoints on an object store: one per test session.

The binary is dev/minio's (built from the Go module proxy, cached; dev/toolchain builds it in
dev/test's background build, so the fixture waits for that through `toolchain` and its tests run
after the others, tests/conftest.py). The fixture starts it on free loopback ports with a
temporary data folder and a random root user and secret key, makes one bucket through the S3
API (boto3), and stops it at the end of the session. Tests give its credentials to the sandbox
through the AWS SDK's environment variables (`MinioServer.env`), never through a config file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from streamlets.runtime.object_store import ACCESS_KEY_ENV, SECRET_KEY_ENV

from .ports import free_ports

REPO = Path(__file__).resolve().parents[2]
BUCKET = "streamlets"


@dataclass(frozen=True)
class MinioServer:
    """A running MinIO: its S3 endpoint (http://127.0.0.1:<port>), credentials and bucket."""

    endpoint: str
    access_key: str
    secret_key: str
    bucket: str
    log: Path

    def env(self) -> dict[str, str]:
        """The AWS SDK's credential variables for a process that reaches the server."""
        return {ACCESS_KEY_ENV: self.access_key, SECRET_KEY_ENV: self.secret_key}

    def client(self):
        """A boto3 S3 client of the server."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name="us-east-1")

    def keys(self, prefix: str) -> list[str]:
        """The object keys of the bucket under `prefix`."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]


def minio_binary() -> str:
    """dev/minio's binary (it builds it if the cache lacks it; its last line is the path)."""
    out = subprocess.run([str(REPO / "dev" / "minio")], capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        pytest.fail(f"dev/minio failed ({out.returncode}):\n{(out.stdout + out.stderr)[-3000:]}", pytrace=False)
    return out.stdout.strip().splitlines()[-1]


@contextlib.contextmanager
def run_minio(folder: Path, host: str = "127.0.0.1") -> Iterator[MinioServer]:
    """A MinIO server listening on ``host`` (a free port; the console on another) with its data
    in ``folder`` and an empty bucket BUCKET, stopped on exit. ``host``: 127.0.0.1 for this
    process, the node IP for pods of dev/cluster's cluster too."""
    binary = minio_binary()
    port, console = free_ports(2)
    user, secret = f"streamlets-{secrets.token_hex(4)}", f"minio-secret-{secrets.token_hex(16)}"
    log = folder / "minio.log"
    env = {**os.environ, "MINIO_ROOT_USER": user, "MINIO_ROOT_PASSWORD": secret, "MINIO_BROWSER": "off",
           "MINIO_UPDATE": "off"}
    with open(log, "wb") as out:
        proc = subprocess.Popen([binary, "server", "--quiet", "--address", f"{host}:{port}",
                                 "--console-address", f"127.0.0.1:{console}", str(folder / "data")],
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    endpoint = f"http://{host}:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{endpoint}/minio/health/live", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"MinIO did not start ({endpoint}):\n{log.read_text()[-2000:]}", pytrace=False)
                time.sleep(0.2)
        server = MinioServer(endpoint, user, secret, BUCKET, log)
        server.client().create_bucket(Bucket=BUCKET)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def minio(toolchain, tmp_path_factory) -> Iterator[MinioServer]:
    """A MinIO server with an empty bucket `streamlets`, for the whole session."""
    with run_minio(tmp_path_factory.mktemp("minio")) as server:
        yield server
