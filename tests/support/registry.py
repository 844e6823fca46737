"""Apicurio Registry, a real schema registry speaking Confluent's REST API (`/apis/ccompat/v7`),
for the schema-registry tests (fixture `secured_schema_registry`, one per test session, secured like
a company's: HTTPS only, HTTP basic auth required) and bench_map's --registry (start_registry).

`io.apicurio:apicurio-registry-app:<version>:tar.gz:all` (104 MB; a Quarkus application) is
fetched from Maven Central once with `mvn dependency:copy` (into Maven's local repository) and
unpacked under `<cache>/apicurio/<version>` (115 MB); 3.0.9 is the newest that runs on Java 17 (3.1 and later need 21).
It keeps its schemas in memory (its default H2 store): a fresh registry per session. Ready in
about 8 seconds, about 260 MB of memory. Basic auth is Quarkus's own (embedded users, `quarkus.http.
auth.basic`, every `/apis/*` path authenticated): 401 without the right user and password.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from blueprint.sandbox.certs import make_ca, make_cert
from streamlets.cache import cache_root

from .ports import free_port

VERSION = "3.0.9"
ARTIFACT = f"io.apicurio:apicurio-registry-app:{VERSION}:tar.gz:all"
CCOMPAT = "/apis/ccompat/v7"  # Confluent's API


def registry_home(version: str = VERSION) -> Path:
    """The unpacked application (`apicurio-registry-app-<version>-runner.jar`, `lib/`), fetched
    and unpacked on first use; atomic, so an interrupted fetch is redone."""
    home = cache_root() / "apicurio" / version
    runner = home / f"apicurio-registry-app-{version}-runner.jar"
    if runner.is_file():
        return home
    home.parent.mkdir(parents=True, exist_ok=True)
    archive = home.parent / f"apicurio-registry-app-{version}-all.tar.gz"
    if not archive.is_file():
        mvn = shutil.which("mvn")
        if mvn is None:
            pytest.fail("mvn not found: it fetches Apicurio Registry from Maven Central (./dev/setup --test installs it)")
        with tempfile.TemporaryDirectory(dir=home.parent) as tmp:
            res = subprocess.run([mvn, "-q", "-B", "-Dstyle.color=never", "dependency:copy", f"-Dartifact={ARTIFACT}",
                                  f"-DoutputDirectory={tmp}"], capture_output=True, text=True, cwd=tmp)
            got = list(Path(tmp).glob("*.tar.gz"))
            if res.returncode != 0 or not got:
                pytest.fail(f"fetching {ARTIFACT} failed:\n{(res.stdout + res.stderr)[-2000:]}")
            os.replace(got[0], archive)
    with tempfile.TemporaryDirectory(dir=home.parent) as tmp:
        with tarfile.open(archive) as tar:
            # The "data" filter (no absolute paths, links out of the folder or device files) where
            # tarfile has it: Python 3.11.4 and later, not Debian 12's 3.11.2
            tar.extractall(tmp, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        shutil.rmtree(home, ignore_errors=True)
        os.replace(tmp, home)
        os.makedirs(tmp)  # for TemporaryDirectory's cleanup
    archive.unlink(missing_ok=True)  # Maven's local repository keeps a copy
    return home


@dataclass(frozen=True)
class RegistryServer:
    """A running registry: `url` is its Confluent-compatible API; `ca_file` the CA of its
    certificate when it serves HTTPS."""

    url: str
    log: Path
    ca_file: Path | None = None
    username: str | None = None
    password_file: Path | None = None  # the password, a file of the test's folder (mode 0600)

    def client(self):
        """A confluent-kafka SchemaRegistryClient of this registry."""
        from confluent_kafka.schema_registry import SchemaRegistryClient

        conf = {"url": self.url}
        if self.ca_file is not None:
            conf["ssl.ca.location"] = str(self.ca_file)
        if self.username is not None and self.password_file is not None:
            conf["basic.auth.user.info"] = f"{self.username}:{self.password_file.read_text()}"
        return SchemaRegistryClient(conf)


def _wait_ready(url: str, proc: subprocess.Popen, log: Path, context: ssl.SSLContext | None, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"Apicurio Registry exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/subjects", timeout=2, context=context) as r:
                if r.status == 200:
                    return
        except urllib.error.HTTPError as e:
            if e.code == 401:  # serving, and asking for the credentials
                return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    pytest.fail(f"Apicurio Registry not ready in {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def start_registry(folder: Path, *, tls: bool = False, username: str | None = None,
                   host: str = "127.0.0.1") -> tuple[RegistryServer, subprocess.Popen]:
    """Start a registry on a free port of `host` (a cluster node's address: pods reach it there),
    its log in `folder`; with `tls`, HTTPS only, with a certificate for `host`, 127.0.0.1 and
    localhost signed by a CA made in `folder/tls`; with `username`, HTTP basic auth required, the
    password made here (in `folder/password`)."""
    home = registry_home()
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {**os.environ, "QUARKUS_HTTP_HOST": host, "QUARKUS_HTTP_PORT": str(port),
           "QUARKUS_LOG_CONSOLE_JSON": "false", "QUARKUS_PROFILE": "prod"}
    ca_file = None
    context = None
    scheme = "http"
    if tls:
        ca = make_ca(folder / "tls", "registry test CA")
        cert = make_cert(folder / "tls", "registry", ca, common_name="registry", hosts=(host, "127.0.0.1", "localhost"))
        env.update({"QUARKUS_HTTP_SSL_PORT": str(port), "QUARKUS_HTTP_PORT": str(free_port()),
                    "QUARKUS_HTTP_INSECURE_REQUESTS": "disabled",
                    "QUARKUS_HTTP_SSL_CERTIFICATE_FILES": str(cert.cert),
                    "QUARKUS_HTTP_SSL_CERTIFICATE_KEY_FILES": str(cert.key)})
        ca_file, scheme = ca.cert, "https"
        context = ssl.create_default_context(cafile=str(ca.cert))
    password_file = None
    if username is not None:
        password_file = folder / "password"
        password_file.write_text(secrets.token_urlsafe(18))
        password_file.chmod(0o600)
        env.update({"QUARKUS_SECURITY_USERS_EMBEDDED_ENABLED": "true", "QUARKUS_SECURITY_USERS_EMBEDDED_PLAIN_TEXT": "true",
                    f"QUARKUS_SECURITY_USERS_EMBEDDED_USERS_{username.upper()}": password_file.read_text(),
                    "QUARKUS_HTTP_AUTH_BASIC": "true", "QUARKUS_HTTP_AUTH_PERMISSION_AUTHENTICATED_PATHS": "/apis/*",
                    "QUARKUS_HTTP_AUTH_PERMISSION_AUTHENTICATED_POLICY": "authenticated"})
    log = folder / "registry.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(["java", "-Xmx384m", "-XX:+UseSerialGC", "-jar",
                                 str(home / f"apicurio-registry-app-{VERSION}-runner.jar")],
                                cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"{scheme}://{host}:{port}{CCOMPAT}"
    try:
        _wait_ready(url, proc, log, context)
    except BaseException:
        proc.kill()
        raise
    return RegistryServer(url=url, log=log, ca_file=ca_file, username=username, password_file=password_file), proc


@contextlib.contextmanager
def serving(folder: Path, *, tls: bool = False, username: str | None = None,
            host: str = "127.0.0.1") -> Iterator[RegistryServer]:
    """start_registry, stopped at the end of the block."""
    server, proc = start_registry(folder, tls=tls, username=username, host=host)
    try:
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def secured_schema_registry(tmp_path_factory) -> Iterator[RegistryServer]:
    """An Apicurio Registry for the session that serves HTTPS only (its CA in `ca_file`) and wants
    basic auth (user `app`, the password in `password_file`)."""
    with serving(tmp_path_factory.mktemp("registry-secured"), tls=True, username="app") as server:
        yield server
