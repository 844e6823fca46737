"""A real single-node Apache Kafka broker (KRaft, combined broker+controller) for local runs and tests.

The Kafka jars come from Maven Central (resolved once with ``mvn`` and cached under
:func:`cache_root`); the broker runs as a child JVM whose state lives in a caller-chosen
directory, so stopping and starting again on the same directory resumes all topics and records.

Start brokers from the main thread: the JVM is tied to its starter with Linux
``PR_SET_PDEATHSIG``, which fires when the *thread* that forked it exits, so a broker started
from a short-lived worker thread would be killed when that thread ends.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

from streamlets.cache import cache_root
from streamlets.kafka_logging import client_config
from streamlets.kafka_security import ConnectionCheckError, KafkaConnection, KafkaSecurity
from ..errors import BlueprintError
from ..scopes import EMBEDDED_BROKER_SECURITY

KAFKA_VERSION = "4.1.1"
LOG4J_VERSION = "2.24.3"

# A sandbox broker restarts often and moves little data: C1-only JIT starts ~1 s faster.
_JVM_OPTS = ["-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_prctl = getattr(ctypes.CDLL(None), "prctl", None)  # looked up here, not between fork and exec; Linux only


class BrokerError(BlueprintError, RuntimeError):
    """The broker could not be resolved, started, stopped or administered."""


# The embedded broker's client listener: plain, SASL_SSL with SCRAM users, or TLS with client
# certificates (mutual TLS). `blueprint run --broker-security` / kafka.embedded-broker.security.
SECURITY_MODES = EMBEDDED_BROKER_SECURITY
SANDBOX_USER = "sandbox"  # the SCRAM user (sasl-ssl) and the client certificate's CN (mtls) clients use
SCRAM_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")


# --------------------------------------------------------------------------------------------
# Jar resolution


def _pom(version: str) -> str:
    deps = [
        ("org.apache.kafka", "kafka_2.13", version),
        ("org.apache.kafka", "kafka-tools", version),  # the admin/CLI tool classes shipped in Kafka's libs/
        ("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),  # Kafka 4 logs via log4j2
    ]
    dep_xml = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in deps
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>streamlets.sandbox</groupId><artifactId>kafka-broker-jars</artifactId>"
        f"<version>1</version><packaging>pom</packaging><dependencies>{dep_xml}</dependencies></project>"
    )


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise BrokerError(f"'{tool}' not found on PATH; the Kafka sandbox needs Java 17+ and Maven")
    return path


def resolve_kafka_jars(version: str = KAFKA_VERSION) -> pathlib.Path:
    """Return the folder of Kafka jars, resolving with mvn into ``cache_root()/kafka/<version>/libs`` on first use.

    Idempotent and safe against a half-finished earlier download or a concurrent resolver:
    jars are copied into a temporary folder that is renamed into place only when complete.
    Raises BrokerError if java or mvn is missing or resolution fails (with mvn's last lines).
    """
    _require("java")
    home = cache_root() / "kafka" / version
    libs = home / "libs"
    if libs.is_dir():
        return libs
    mvn = _require("mvn")
    home.mkdir(parents=True, exist_ok=True)
    for stale in home.glob("resolve-*"):  # left by a resolver that was killed; an hour is far beyond a download
        if time.time() - stale.stat().st_mtime > 3600:
            shutil.rmtree(stale, ignore_errors=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="resolve-", dir=home))
    try:
        (work / "pom.xml").write_text(_pom(version))
        cmd = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
               f"-DoutputDirectory={work / 'libs'}", "-DincludeScope=runtime"]
        res = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
        if res.returncode != 0 or not any((work / "libs").glob("*.jar")):
            tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-20:])
            raise BrokerError(f"resolving Kafka {version} jars with mvn failed (exit {res.returncode}):\n{tail}")
        try:
            os.rename(work / "libs", libs)  # atomic: libs/ is either absent or complete
        except OSError:
            if not libs.is_dir():  # a concurrent resolver winning the race is fine; anything else is not
                raise
        return libs
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Ports


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        # Java listens with SO_REUSEADDR, so TIME_WAIT leftovers from a killed broker don't block it.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]  # hold all open so the ports are distinct
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# --------------------------------------------------------------------------------------------
# Broker


def _die_with_parent(parent: int):
    """A preexec_fn making the kernel SIGKILL the JVM when the forking thread dies (even by SIGKILL)."""
    def preexec() -> None:
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # parent died before prctl took effect
            os._exit(1)
    return preexec


class KafkaBroker:
    """A Kafka broker JVM whose state lives in ``state_dir``.

    Layout: ``data/`` (log.dirs; kept across restarts), ``server.properties``,
    ``log4j2.properties``, ``broker.log`` (broker log plus JVM stdout/stderr), ``ports.json``.

    ``port`` is the PLAINTEXT client listener, ``controller_port`` the KRaft CONTROLLER listener
    (``listeners``/``controller.quorum.voters``). When not given, ports remembered in ports.json
    are reused if still free, else fresh free ports are picked. ``heap`` is the JVM ``-Xmx``.
    ``host`` is the address the client listener binds and advertises (Kafka's ``listeners`` and
    ``advertised.listeners``): loopback for the sandbox; a local cluster's pods need an address of
    this machine they can route to (the node's IP). The controller listener stays on loopback.

    ``security`` (one of SECURITY_MODES) secures the client listener like a production broker:

    - ``"sasl-ssl"``: SASL_SSL with SCRAM-SHA-512 and SCRAM-SHA-256; the user ``sandbox`` with a
      password made at the first start (``users/sandbox.password``); ``add_scram_user`` adds more.
    - ``"mtls"``: SSL with ``ssl.client.auth=required``: clients present a certificate the
      broker's CA signed (``tls/client.pem``, ``tls/client.key``, CN ``sandbox``).

    Certificates are made at the first start with openssl under ``tls/`` (blueprint.sandbox.certs:
    ``ca.pem`` the CA clients trust; the broker's, naming ``host``, localhost and 127.0.0.1) and
    reused after. A secured broker also listens on a loopback PLAINTEXT listener
    (``internal_port``: inter-broker traffic, and where the SCRAM users are written).
    ``client_security()`` / ``connection()`` say how a client connects.
    """

    def __init__(self, state_dir: pathlib.Path, *, port: int | None = None, controller_port: int | None = None,
                 version: str = KAFKA_VERSION, heap: str = "512m", host: str = "127.0.0.1", security: str = "none"):
        if security not in SECURITY_MODES:
            raise BrokerError(f"broker security {security!r}: use one of {', '.join(SECURITY_MODES)}")
        self.state_dir = pathlib.Path(state_dir)
        self.host = host
        self.version = version
        self.heap = heap
        self.security = security
        self._requested = (port, controller_port)
        self.port: int | None = None
        self.controller_port: int | None = None
        self.internal_port: int | None = None
        self._pick_ports()
        self._proc: subprocess.Popen | None = None
        self._log_start = 0

    @property
    def bootstrap_servers(self) -> str:
        """Client bootstrap address, ``"<host>:<port>"`` (``127.0.0.1`` unless ``host`` was given)."""
        return f"{self.host}:{self.port}"

    @property
    def tls_dir(self) -> pathlib.Path:
        """`<state_dir>/tls`: the CA (`ca.pem`), the broker's key store, the client certificate."""
        return self.state_dir / "tls"

    def password_file(self, user: str = SANDBOX_USER) -> pathlib.Path:
        """`<state_dir>/users/<user>.password`: a SCRAM user's password (sasl-ssl)."""
        return self.state_dir / "users" / f"{user}.password"

    def client_security(self) -> KafkaSecurity:
        """How a client connects to the client listener: PLAINTEXT; SASL_SSL, SCRAM-SHA-512 as the
        user `sandbox` (its password file); or SSL with the client certificate. Valid once the
        broker has started (the files exist)."""
        if self.security == "sasl-ssl":
            return KafkaSecurity(protocol="SASL_SSL", ca_file=str(self.tls_dir / "ca.pem"), sasl_mechanism="SCRAM-SHA-512",
                                 username=SANDBOX_USER, password_file=str(self.password_file()))
        if self.security == "mtls":
            return KafkaSecurity(protocol="SSL", ca_file=str(self.tls_dir / "ca.pem"),
                                 cert_file=str(self.tls_dir / "client.pem"), key_file=str(self.tls_dir / "client.key"))
        return KafkaSecurity()

    def connection(self) -> KafkaConnection:
        """The bootstrap servers with client_security(): what every client of this broker is given."""
        return KafkaConnection(bootstrap_servers=self.bootstrap_servers, security=self.client_security())

    @property
    def _admin_servers(self) -> str:
        """Where the broker itself is administered: the internal PLAINTEXT listener when secured."""
        return f"127.0.0.1:{self.internal_port}" if self.security != "none" else self.bootstrap_servers

    @property
    def pid(self) -> int | None:
        """Process id of the broker JVM, or None if not started."""
        return self._proc.pid if self._proc else None

    @property
    def log_file(self) -> pathlib.Path:
        """`<state_dir>/broker.log`: the broker's log4j output and the JVM's stdout and stderr."""
        return self.state_dir / "broker.log"

    def _pick_ports(self) -> None:
        """Explicit ports win; else keep this object's or ports.json's port while it is free; else a fresh one."""
        try:
            saved = json.loads((self.state_dir / "ports.json").read_text())
        except (OSError, ValueError):
            saved = {}
        taken = {p for p in self._requested if p}

        def pick(explicit: int | None, *remembered: int | None) -> int:
            port = explicit or next((p for p in remembered if p and p not in taken and _port_free(p)), None) \
                or next(p for p in _free_ports(3) if p not in taken)
            taken.add(port)
            return port

        self.port = pick(self._requested[0], self.port, saved.get("port"))
        self.controller_port = pick(self._requested[1], self.controller_port, saved.get("controller_port"))
        if self.security != "none":
            self.internal_port = pick(None, self.internal_port, saved.get("internal_port"))

    def _write_config(self) -> pathlib.Path:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "ports.json").write_text(json.dumps(
            {"port": self.port, "controller_port": self.controller_port}
            | ({"internal_port": self.internal_port} if self.internal_port else {})))
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            **self._secured_listeners(),
            "log.dirs": str(self.state_dir / "data"),
            # single node: every internal topic must fit on one replica
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",  # consumers join immediately
            "auto.create.topics.enable": "false",  # topics are declared, typos should fail loudly
            "num.partitions": "1",
            # After a SIGKILL the restarted controller refuses the broker's re-registration until the
            # old session expires (default 9 s); a short session makes unclean restarts fast.
            "broker.heartbeat.interval.ms": "500",
            "broker.session.timeout.ms": "3000",
        }
        server = self.state_dir / "server.properties"
        server.touch()
        os.chmod(server, 0o600)  # holds the key store's password when secured
        server.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.state_dir / "log4j2.properties").write_text(
            "status = warn\n"
            "appender.file.type = File\n"
            "appender.file.name = FILE\n"
            f"appender.file.fileName = {self.log_file}\n"
            "appender.file.append = true\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.file.ref = FILE\n")
        return server

    def _secured_listeners(self) -> dict[str, str]:
        """The server.properties of a secured client listener (none: nothing), certificates made
        first (blueprint.sandbox.certs)."""
        if self.security == "none":
            return {}
        from .certs import make_ca, make_cert, make_pkcs12

        ca = make_ca(self.tls_dir)
        make_cert(self.tls_dir, "client", ca, common_name=SANDBOX_USER)
        # one certificate per advertised host, so that a broker moved to another address is trusted there too
        broker = make_cert(self.tls_dir, f"broker-{self.host}", ca, common_name=self.host,
                           hosts=[self.host, "localhost", "127.0.0.1"])
        store, store_password = make_pkcs12(self.tls_dir, f"broker-{self.host}", broker, ca)
        name = "SASL_SSL" if self.security == "sasl-ssl" else "SSL"
        internal = f"INTERNAL://127.0.0.1:{self.internal_port}"
        props = {
            "listeners": f"{name}://{self.host}:{self.port},{internal},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"{name}://{self.host}:{self.port},{internal}",
            "listener.security.protocol.map": f"{name}:{name},INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(store),
            "ssl.keystore.password": store_password.read_text(),
            "ssl.key.password": store_password.read_text(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.cert),
        }
        if self.security == "sasl-ssl":
            props["sasl.enabled.mechanisms"] = ",".join(SCRAM_MECHANISMS)
            for mechanism in SCRAM_MECHANISMS:
                props[f"listener.name.sasl_ssl.{mechanism.lower()}.sasl.jaas.config"] = \
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        else:
            props["ssl.client.auth"] = "required"
        return props

    def add_scram_user(self, user: str, password: str, timeout: float = 30.0) -> None:
        """Create or update the SCRAM-SHA-512 and SCRAM-SHA-256 credentials of `user` (KRaft keeps
        them in the cluster metadata), through the internal listener. BrokerError if refused."""
        from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                           UserScramCredentialUpsertion)

        admin = AdminClient(client_config({"bootstrap.servers": self._admin_servers}))
        for m in SCRAM_MECHANISMS:  # one request each: Kafka refuses two changes of one user in a request
            info = ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")), 8192)
            upsert = UserScramCredentialUpsertion(user, info, password.encode())
            for fut in admin.alter_user_scram_credentials([upsert], request_timeout=timeout).values():
                err = fut.exception(timeout=timeout)
                if err is not None:
                    raise BrokerError(f"creating the SCRAM user {user!r} ({m}) on the broker at "
                                      f"{self._admin_servers} failed: {err}")

    def _sandbox_user(self) -> None:
        """The user `sandbox` with its password (made once, kept in password_file())."""
        import secrets

        path = self.password_file()
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                f.write(secrets.token_urlsafe(24))
            os.replace(tmp, path)
        self.add_scram_user(SANDBOX_USER, path.read_text())

    def _java(self, libs: pathlib.Path, *args: str) -> list[str]:
        return [_require("java"), f"-Xmx{self.heap}", *_JVM_OPTS,
                f"-Dlog4j2.configurationFile={self.state_dir / 'log4j2.properties'}",
                "-cp", f"{libs}/*", *args]

    def _format_if_needed(self, libs: pathlib.Path, server: pathlib.Path) -> None:
        if (self.state_dir / "data" / "meta.properties").exists():
            return  # already formatted: formatting again would refuse or wipe the cluster identity
        cluster_id = "-"
        while cluster_id.startswith("-"):  # like Kafka's Uuid.randomUuid: a leading '-' reads as an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        res = subprocess.run(self._java(libs, "kafka.tools.StorageTool", "format", "-t", cluster_id,
                                        "-c", str(server)), capture_output=True, text=True)
        if res.returncode != 0:
            tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-20:])
            raise BrokerError(f"formatting Kafka storage in {self.state_dir / 'data'} failed:\n{tail}")

    def start(self, timeout: float = 60.0) -> "KafkaBroker":
        """Resolve jars, write config, format storage if new, start the JVM and wait (``timeout``
        seconds) until an AdminClient can list topics. Raises BrokerError naming the log file.

        Call from the main thread (or one that outlives the broker): see PR_SET_PDEATHSIG above."""
        if self.is_running():
            return self
        libs = resolve_kafka_jars(self.version)
        self._pick_ports()  # ports may have been taken since __init__ or the last run
        server = self._write_config()
        self._format_if_needed(libs, server)
        with open(self.log_file, "ab") as out:  # O_APPEND, so it interleaves safely with log4j's writes
            self._log_start = out.tell()  # where this run's log begins, for error excerpts
            self._proc = subprocess.Popen(
                self._java(libs, "kafka.Kafka", str(server)), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, cwd=self.state_dir, preexec_fn=_die_with_parent(os.getpid()),
                # Its own session: a Ctrl-C at the terminal (SIGINT to the foreground process group)
                # reaches only the sandbox, which stops its queries (their last transactions
                # included) while the broker still runs, and the broker last. PDEATHSIG still ends
                # the JVM with its parent, however that dies.
                start_new_session=True)
        try:
            self._wait_ready(timeout)
        except BrokerError:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        admin = None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerError(f"Kafka broker exited with code {self._proc.returncode}; "
                                  f"see {self.log_file}\n{self._log_excerpt()}")
            try:
                # a plain TCP probe first keeps librdkafka from logging connection-refused noise
                host, _, port = self._admin_servers.rpartition(":")
                socket.create_connection((host, int(port)), timeout=1).close()
                admin = admin or AdminClient(client_config({"bootstrap.servers": self._admin_servers,
                                                            "error_cb": lambda _err: None}))
                if admin.list_topics(timeout=2).brokers:
                    break
            except Exception:
                pass
            time.sleep(0.2)
        else:
            raise BrokerError(f"Kafka broker not ready after {timeout:.0f}s; see {self.log_file}\n{self._log_excerpt()}")
        if self.security == "sasl-ssl":
            self._sandbox_user()
        if self.security != "none":  # the secured listener answers a client as clients will connect
            try:
                self.connection().check(max(5.0, deadline - time.monotonic()))
            except ConnectionCheckError as e:
                raise BrokerError(f"{e}; see {self.log_file}") from None

    def _log_excerpt(self) -> str:
        """The first ERROR of this run with its exception line (the cause, not the shutdown noise), else the tail."""
        try:
            with open(self.log_file, "rb") as f:
                f.seek(self._log_start)
                lines = f.read().decode(errors="replace").splitlines()
        except OSError:
            return ""
        for i, line in enumerate(lines):
            if " ERROR " in line or " FATAL " in line:
                return "\n".join(lines[i:i + 2])
        return "\n".join(lines[-10:])

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the JVM (controlled shutdown), wait up to ``timeout`` seconds, then SIGKILL."""
        if not self.is_running():
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def is_running(self) -> bool:
        """True while the broker's process runs (started and not exited)."""
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------
# Admin helpers


def create_topics(bootstrap: str | KafkaConnection, topics: list[tuple[str, int, dict[str, str]]], timeout: float = 30) -> None:
    """Create the missing topics among ``(name, partitions, topic config)`` tuples (replication 1).

    Existing topics are left alone (TOPIC_ALREADY_EXISTS is ignored); waits up to ``timeout``
    seconds, including until every new partition has a leader. Raises BrokerError on other failures.
    """
    from confluent_kafka.admin import AdminClient

    if not topics:
        return
    admin = AdminClient(client_config({"bootstrap.servers": bootstrap}))
    try:
        _create_topics(admin, bootstrap, topics, timeout)
    finally:
        admin.poll(0)  # hands librdkafka's queued log lines (connection errors) to the log


def _create_topics(admin, bootstrap: str | KafkaConnection, topics: list[tuple[str, int, dict[str, str]]], timeout: float) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    deadline = time.monotonic() + timeout
    new = [NewTopic(name, num_partitions=parts, replication_factor=1, config=dict(cfg))
           for name, parts, cfg in topics]
    futures = admin.create_topics(new, operation_timeout=timeout, request_timeout=timeout)
    for name, fut in futures.items():
        try:  # .exception() rather than .result(): no raised traceback keeping `admin` alive in a cycle
            err = fut.exception(timeout=max(0.1, deadline - time.monotonic()))
        except Exception as e:  # timeout
            raise BrokerError(f"creating topic {name!r} timed out after {timeout}s") from e
        if err is None:
            continue
        kerr = err.args[0] if isinstance(err, KafkaException) and err.args else None
        if not (kerr is not None and kerr.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise BrokerError(f"creating topic {name!r} failed: {kerr or err}")
    # Creation is acknowledged before leaders are elected; wait so producers don't hit LEADER_NOT_AVAILABLE.
    names = [t[0] for t in topics]
    while True:
        try:
            md = admin.list_topics(timeout=max(0.1, deadline - time.monotonic()))
        except KafkaException as e:
            raise BrokerError(f"listing topics at {bootstrap} failed: {e}") from e
        if all(n in md.topics and md.topics[n].error is None and md.topics[n].partitions
               and all(p.leader >= 0 for p in md.topics[n].partitions.values()) for n in names):
            return
        if time.monotonic() > deadline:
            raise BrokerError(f"topics {names} have no leaders after {timeout}s")
        time.sleep(0.1)


def end_offsets(bootstrap: str | KafkaConnection, topic: str) -> dict[int, int]:
    """Per-partition high watermark (offset of the next record) of ``topic``. Raises BrokerError if unknown."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(client_config({"bootstrap.servers": bootstrap, "group.id": "streamlets-end-offsets",
                                       "enable.auto.commit": False}))
    try:
        t = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if t is None or t.error is not None:
            raise BrokerError(f"topic {topic!r} not available: {t.error if t else 'unknown topic'}")
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in sorted(t.partitions)}
    except KafkaException as e:
        raise BrokerError(f"reading end offsets of {topic!r} at {bootstrap} failed: {e}") from e
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    """`python -m blueprint.sandbox.kafka_broker --host IP [--port N] [--state-dir DIR]
    [--security none|sasl-ssl|mtls]`: one broker in the foreground until Ctrl-C or SIGTERM (a
    local cluster's Kafka: its pods reach the node's IP; a secured broker to rehearse against,
    whose client settings it prints as run config lines). Exit status 0 after a clean stop, 1 if
    it cannot start (BrokerError's message)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m blueprint.sandbox.kafka_broker", description=main.__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on and advertise (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="client port (default: a free one, kept across runs)")
    parser.add_argument("--state-dir", default=str(cache_root() / "local-kafka"),
                        help="log dirs and settings (default ~/.cache/streamlets/local-kafka)")
    parser.add_argument("--security", default="none", choices=SECURITY_MODES,
                        help="the client listener: plain, SASL_SSL with SCRAM users, or mutual TLS (default none)")
    args = parser.parse_args(argv)
    broker = KafkaBroker(pathlib.Path(args.state_dir), port=args.port, host=args.host, security=args.security)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        broker.start()
        print(f"Kafka at {broker.bootstrap_servers} (state {args.state_dir}); Ctrl-C stops it", flush=True)
        for key, value in broker.client_security().model_dump(exclude_defaults=True).items():
            print(f"kafka.security.{key.replace('_', '-')} = {json.dumps(value)}", flush=True)
        while broker.is_running():
            time.sleep(1)
        print(f"the broker exited; see {broker.log_file}", file=sys.stderr)
        return 1
    except BrokerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        broker.stop()


if __name__ == "__main__":
    raise SystemExit(main())
