"""A real, throwaway Kubernetes control plane for tests: etcd plus kube-apiserver, nothing else.

The binaries come from ``dev/k8s-env`` (built from the Go module proxy and cached), which also
writes ``<cache>/k8s/env.json`` naming them; :func:`load_env` reads it.

What you get is the API server alone: admission, validation against CRD schemas, RBAC, server-side
apply, watches. There is no kube-controller-manager, scheduler or kubelet, so nothing runs Pods,
namespaces stuck with the ``kubernetes`` finalizer are never purged, no garbage collection happens
and service accounts are not created automatically (the ServiceAccount admission plugin is off so
Pods can still be created). Impersonate ``system:serviceaccount:<ns>:<name>`` to check RBAC.

Authentication is a static token for user ``admin`` in group ``system:masters``
(:attr:`KubeServer.token`); the kubeconfig written to :attr:`KubeServer.kubeconfig` uses it and
trusts the apiserver's self-signed certificate (real TLS verification, no insecure-skip).

Start servers from the main thread: etcd and kube-apiserver are tied to the thread that forks
them with ``PR_SET_PDEATHSIG`` (see blueprint/sandbox/kafka_broker.py), so they die with the test
process even when it is SIGKILLed.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import secrets
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request

from blueprint.sandbox.kafka_broker import _die_with_parent, _free_ports, _port_free
from streamlets.cache import cache_root

SPARK_APPLICATION_CRD = "sparkapplications.sparkoperator.k8s.io"
_BINARIES = ("kube_apiserver", "etcd", "kubectl", "helm", "spark_application_crd")


class KubeServerError(RuntimeError):
    """etcd or kube-apiserver could not be started, or a kubectl call failed."""


class KubeEnvMissing(KubeServerError):
    """dev/k8s-env has not been run (or its cache was removed)."""


def env_file() -> pathlib.Path:
    return cache_root() / "k8s" / "env.json"


def load_env(path: str | os.PathLike | None = None) -> dict:
    """The paths and versions dev/k8s-env recorded; raises KubeEnvMissing saying what to run."""
    path = pathlib.Path(path) if path else env_file()
    try:
        env = json.loads(path.read_text())
    except FileNotFoundError:
        raise KubeEnvMissing(f"{path} not found: run dev/k8s-env first (builds kube-apiserver, etcd, "
                             "kubectl and helm from the Go module proxy; cached, the first build takes "
                             "about 9 minutes on 2 cores)") from None
    missing = [f"{key}={env.get(key)}" for key in _BINARIES if not env.get(key) or not os.path.exists(env[key])]
    if missing:
        raise KubeEnvMissing(f"{path} names missing files ({', '.join(missing)}): run dev/k8s-env again")
    return env


def _log_tail(path: pathlib.Path, start: int = 0, lines: int = 25) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class KubeServer:
    """etcd and kube-apiserver on free loopback ports, with all state in ``workdir``.

    Layout: ``etcd/`` (data, kept across restarts), ``pki/`` (the apiserver's self-signed serving
    certificate, kept), ``sa.key`` (service-account token signing key), ``tokens.csv`` (a new
    admin token per start), ``kubeconfig``, ``etcd.log``, ``kube-apiserver.log``, ``ports.json``
    (ports reused on restart when still free), ``kube-cache/`` and ``helm/`` (client caches).
    ``extra_args`` are appended to kube-apiserver's command line (e.g. ``--feature-gates=...``).
    """

    def __init__(self, workdir: str | os.PathLike, *, env: dict | None = None, extra_args: tuple[str, ...] = ()):
        self.workdir = pathlib.Path(workdir)
        self.env = env if env is not None else load_env()
        self.extra_args = tuple(extra_args)
        self.token = ""
        self.etcd_port = self.etcd_peer_port = self.port = 0
        self._etcd: subprocess.Popen | None = None
        self._apiserver: subprocess.Popen | None = None
        self._log_start: dict[str, int] = {}
        self.startup_seconds: float | None = None
        self._etcd_help: str | None = None

    # ----------------------------------------------------------------------------------------
    # Addresses and files

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def kubeconfig(self) -> pathlib.Path:
        return self.workdir / "kubeconfig"

    @property
    def ca_file(self) -> pathlib.Path:
        """The apiserver's self-signed serving certificate followed by its CA (valid for
        127.0.0.1): what the kubeconfig trusts."""
        return self.workdir / "pki" / "apiserver.crt"

    @property
    def etcd_log(self) -> pathlib.Path:
        return self.workdir / "etcd.log"

    @property
    def apiserver_log(self) -> pathlib.Path:
        return self.workdir / "kube-apiserver.log"

    def subprocess_env(self) -> dict[str, str]:
        """os.environ plus KUBECONFIG and PATH starting with the built kubectl and helm, for
        anything the test starts (an operator, kubectl plugins, helm). kubectl's discovery cache
        and helm's cache/config/data live in the workdir, not in ~."""
        path = os.pathsep.join([self.env["bin_dir"], os.path.dirname(self.env["helm"]), os.environ.get("PATH", "")])
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PATH": path,
                "KUBECACHEDIR": str(self.workdir / "kube-cache"),
                **{f"HELM_{kind}_HOME": str(self.workdir / "helm" / kind.lower()) for kind in ("CACHE", "CONFIG", "DATA")}}

    # ----------------------------------------------------------------------------------------
    # Lifecycle

    def start(self, timeout: float = 90.0) -> "KubeServer":
        """Start etcd and kube-apiserver, wait (``timeout`` seconds in all) until /readyz is ok
        and the ``default`` namespace exists, and write the kubeconfig."""
        if self.is_running():
            return self
        began = time.monotonic()
        deadline = began + timeout
        self.stop()  # whichever of the two is still up after the other died
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._pick_ports()
        try:
            self._start_etcd()
            self._wait_etcd(deadline)
            self._start_apiserver()
            self._wait_ready(deadline)
        except BaseException:
            self.stop()
            raise
        self._write_kubeconfig()
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM kube-apiserver then etcd, each given ``timeout`` seconds before SIGKILL."""
        for proc in (self._apiserver, self._etcd):
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._apiserver = self._etcd = None

    def is_running(self) -> bool:
        return all(p is not None and p.poll() is None for p in (self._etcd, self._apiserver))

    def __enter__(self) -> "KubeServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _pick_ports(self) -> None:
        remembered = {}
        ports_file = self.workdir / "ports.json"
        if ports_file.exists():
            remembered = json.loads(ports_file.read_text())
        names = ("etcd", "etcd_peer", "apiserver")
        fresh = iter(_free_ports(len(names)))
        picked = {}
        for name in names:
            port = remembered.get(name)
            picked[name] = port if port and port not in picked.values() and _port_free(port) else next(fresh)
        # a fresh port could equal a remembered one that was kept: pick again in that (rare) case
        if len(set(picked.values())) < len(names):
            picked = dict(zip(names, _free_ports(len(names)), strict=True))
        ports_file.write_text(json.dumps(picked))
        self.etcd_port, self.etcd_peer_port, self.port = picked["etcd"], picked["etcd_peer"], picked["apiserver"]

    def _popen(self, name: str, argv: list[str], log: pathlib.Path) -> subprocess.Popen:
        with open(log, "ab") as out:
            self._log_start[name] = out.tell()
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    cwd=self.workdir, preexec_fn=_die_with_parent(os.getpid()))

    def _start_etcd(self) -> None:
        etcd = self.env["etcd"]
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        argv = [etcd, "--name=kube-test", f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}", f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=kube-test={peer}", "--log-level=warn"]
        if self._etcd_supports("--unsafe-no-fsync"):
            argv.append("--unsafe-no-fsync")  # test data: skip fsync, much faster on slow disks
        self._etcd = self._popen("etcd", argv, self.etcd_log)

    def _etcd_supports(self, flag: str) -> bool:
        if self._etcd_help is None:
            res = subprocess.run([self.env["etcd"], "--help"], capture_output=True, text=True, timeout=30)
            self._etcd_help = res.stdout + res.stderr
        return flag in self._etcd_help

    def _wait_etcd(self, deadline: float) -> None:
        while True:
            if self._etcd.poll() is not None:
                raise KubeServerError(f"etcd exited with code {self._etcd.returncode}; see {self.etcd_log}\n"
                                      f"{_log_tail(self.etcd_log, self._log_start['etcd'])}")
            try:
                with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as resp:
                    if json.loads(resp.read()).get("health") == "true":
                        return
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise KubeServerError(f"etcd not healthy in time; see {self.etcd_log}\n"
                                      f"{_log_tail(self.etcd_log, self._log_start['etcd'])}")
            time.sleep(0.1)

    def _service_account_key(self) -> pathlib.Path:
        key = self.workdir / "sa.key"
        if not key.exists():
            openssl = shutil.which("openssl")
            if openssl is None:
                raise KubeServerError("openssl not found: needed once to make the service-account signing key")
            tmp = key.with_suffix(".tmp")
            subprocess.run([openssl, "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                            "-out", str(tmp)], check=True, capture_output=True, timeout=60)
            tmp.rename(key)
        return key

    def _start_apiserver(self) -> None:
        self.token = secrets.token_urlsafe(32)
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f'{self.token},admin,admin,"system:masters"\n')
        tokens.chmod(0o600)
        key = self._service_account_key()
        argv = [
            self.env["kube_apiserver"],
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.port}",
            f"--cert-dir={self.workdir / 'pki'}",  # self-signed serving certificate made on first start
            f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={key}", f"--service-account-signing-key-file={key}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            # no controller-manager creates the "default" service accounts this plugin insists on
            "--disable-admission-plugins=ServiceAccount",
            *self.extra_args,
        ]
        self._apiserver = self._popen("kube-apiserver", argv, self.apiserver_log)

    def _wait_ready(self, deadline: float) -> None:
        last = ""
        while True:
            for name, proc, log in (("etcd", self._etcd, self.etcd_log),
                                    ("kube-apiserver", self._apiserver, self.apiserver_log)):
                if proc.poll() is not None:
                    raise KubeServerError(f"{name} exited with code {proc.returncode}; see {log}\n"
                                          f"{_log_tail(log, self._log_start[name])}")
            try:
                status, body = self.get("/readyz")
                last = f"/readyz: HTTP {status} {body.decode(errors='replace')[-500:]}"
                if status == 200:
                    status, body = self.get("/api/v1/namespaces/default")
                    last = f"namespace default: HTTP {status}"
                    if status == 200:
                        return
            except OSError as e:
                last = f"{self.url}: {e}"
            if time.monotonic() > deadline:
                raise KubeServerError(f"kube-apiserver not ready in time ({last}); see {self.apiserver_log}\n"
                                      f"{_log_tail(self.apiserver_log, self._log_start['kube-apiserver'])}")
            time.sleep(0.2)

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "test", "preferences": {},
            "clusters": [{"name": "test", "cluster": {
                "server": self.url,
                "certificate-authority-data": base64.b64encode(self.ca_file.read_bytes()).decode()}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin", "namespace": "default"}}],
        }
        tmp = self.kubeconfig.with_suffix(".tmp")
        tmp.write_text(json.dumps(config, indent=2))  # JSON is YAML: kubectl and every client read it
        tmp.chmod(0o600)
        tmp.rename(self.kubeconfig)

    # ----------------------------------------------------------------------------------------
    # Clients

    def get(self, path: str, timeout: float = 5) -> tuple[int, bytes]:
        """GET ``path`` as admin, e.g. ``/readyz?verbose``: (HTTP status, body)."""
        if self.ca_file.exists():
            ctx = ssl.create_default_context(cafile=str(self.ca_file))
        else:  # not written yet: the apiserver writes it just before it starts serving
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        req = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def kubectl(self, *args: str, check: bool = False, input: str | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess:
        """Run the built kubectl against this server; output captured as text."""
        return self._run([self.env["kubectl"], f"--kubeconfig={self.kubeconfig}", *args],
                         check=check, input=input, timeout=timeout)

    def helm(self, *args: str, check: bool = False, timeout: float = 300) -> subprocess.CompletedProcess:
        """Run the cached helm against this server; output captured as text."""
        return self._run([self.env["helm"], f"--kubeconfig={self.kubeconfig}", *args], check=check, timeout=timeout)

    def _run(self, argv: list[str], *, check: bool, timeout: float, input: str | None = None):
        res = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=timeout,
                             env=self.subprocess_env())
        if check and res.returncode != 0:
            raise KubeServerError(f"{' '.join(argv[:1] + argv[2:])} failed with code {res.returncode}:\n"
                                  f"{res.stderr.strip() or res.stdout.strip()}")
        return res

    def apply_file(self, path: str | os.PathLike, *, server_side: bool = False) -> str:
        """``kubectl apply -f path`` (``--server-side`` for objects too large for the client-side
        last-applied annotation, e.g. CRDs); returns kubectl's output, raises KubeServerError."""
        args = ["apply", "-f", str(path)] + (["--server-side", "--force-conflicts"] if server_side else [])
        return self.kubectl(*args, check=True).stdout

    def install_spark_operator_crd(self, timeout: float = 60) -> None:
        """Apply the Spark Operator's SparkApplication CRD (cached by dev/k8s-env; too large for
        client-side apply, so server-side) and wait until it is Established."""
        self.apply_file(self.env["spark_application_crd"], server_side=True)
        self.wait_crd_established(SPARK_APPLICATION_CRD, timeout)

    def wait_crd_established(self, name: str, timeout: float = 60) -> None:
        """Wait until CustomResourceDefinition ``name`` (plural.group) is Established, i.e. served.
        (Polled here: ``kubectl wait`` fails instead of waiting while .status.conditions is null.)"""
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conditions = json.loads(body).get("status", {}).get("conditions") or [] if status == 200 else []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                return
            if time.monotonic() > deadline:
                raise KubeServerError(f"CRD {name} not Established after {timeout:.0f}s "
                                      f"(HTTP {status}, conditions {conditions})")
            time.sleep(0.1)

    def api_client(self):
        """A kubernetes.client.ApiClient (the ``kubernetes`` package) for this server's admin."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))
