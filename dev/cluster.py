"""A real Kubernetes cluster on this machine, one node or several, for end-to-end tests (``dev/cluster``).

Everything is built here by ``dev/k8s-env`` and ``dev/k8s-node-env`` (binaries from the Go module
proxy, images with buildah from scratch: no registry is reachable) and recorded in
``<cache>/k8s/env.json``. ``KubeCluster(state_dir).up()`` starts, as detached processes (their own
session, pid files, logs in ``<state>/logs``) that outlive the caller:

* etcd (loopback, no fsync: test data) and kube-apiserver (client-certificate and service-account
  authentication, ``Node,RBAC`` authorization, the default admission plugins plus NodeRestriction,
  so ServiceAccount admission is on; serving certificate for the node IP, 127.0.0.1, 10.96.0.1
  and kubernetes.default.svc.cluster.local; advertises the node IP, so pods reach it through the
  ``kubernetes`` Service),
* kube-controller-manager (all default controllers: service-account tokens, root CA publisher,
  PV binder, namespace and garbage collectors, endpoints/endpointslices, node lifecycle, node
  IPAM) and kube-scheduler,
* per node (``--nodes N``, default 1; see "Several nodes" below) a containerd with its own
  config, root, state and socket under ``<state>/containerd`` (cgroupfs, overlayfs, sandbox image
  ``localhost/streamlets/pause:3.10``, CNI config of our own) and a
  kubelet (cgroupfs driver on cgroup v1 with ``failCgroupV1: false``, x509 + webhook
  authentication and webhook authorization, serving certificate signed by the cluster CA, DNS
  ``10.96.0.10``, a resolv.conf without any nameserver so nothing is asked outside),
* kube-proxy in nftables mode (iptables mode when ``nft`` is missing), see ``_proxy_mode``,
* a bridge CNI network ``streamlets0`` (host-local IPAM 10.244.0.0/24, gateway 10.244.0.1, no
  masquerading; node i: ``streamlets<i>``, 10.244.i.0/24) and an nftables guard that drops
  anything pods would forward out of the uplink,
* CoreDNS (Deployment + ``kube-dns`` Service, zone cluster.local plus the nodes' names, no
  ``forward``) and rancher's local-path-provisioner with the default StorageClass ``local-path``
  (volumes under ``<state>/local-path``).

``down()`` stops all of it and undoes what it did to the machine: pod processes, shims, mounts
under the state dir, network namespaces, the bridge and veths, kube-proxy's and kubelet's
nftables/iptables rules, the guard, IPAM state, conntrack entries, the kubepods cgroups and the
sysctls kubelet, kube-proxy and the bridge plugin change (saved by ``up``).

Only one cluster can run on a machine (one bridge, one set of ports, one /kubepods cgroup): the
running one is recorded in /run/streamlets-cluster/active, and commands without a state dir use
it. Needs root.

Several nodes (``dev/cluster up --nodes N``, ``KubeCluster(nodes=N)``; issue 28): one control
plane and one kube-proxy; each node is a containerd and a kubelet of its own (:class:`Node`: own
config, root, state and socket, own kubelet root dir, name ``<host>-<i+1>``, client and serving
certificates, API and healthz ports, ``cgroupRoot`` ``/streamlets-node-<i+1>`` so two kubelets
never manage the same /kubepods, own bridge ``streamlets<i>`` and pod CIDR ``10.244.<i>.0/24``).
Two kubelets never share a containerd: a kubelet removes the pod sandboxes it does not know of.
The Node objects are created before their kubelets start, each with its pod CIDR, so the range
in the Node's spec is the one its CNI config hands out (kube-controller-manager's allocator then
marks it used). ``load`` imports an image into every node's containerd; ``down`` cleans every node.

Why the nodes share the host's network namespace (not a namespace each, not podman containers
as kind does): it is the least machinery that gives what the tests need. All bridges are in the
host's namespace, so the host routes between them: a pod on node A reaches a pod on node B by
its own address (no overlay, no NAT, no routes to set up), a Service through the one kube-proxy
(its rules serve every bridge since they share the netns), and the host (Kafka, MinIO) at the
node IP as before. The apiserver reaches each kubelet at the node IP on the node's own port
(``status.daemonEndpoints``). Network namespaces per node would need veth pairs, routes, a
kube-proxy and nftables rules per namespace and a way for pods to reach the host's node IP; nodes
as containers (kind) would need a node image with containerd, kubelet and systemd and nested
cgroups. What sharing costs: all nodes have the same InternalIP; hostNetwork pods and hostPorts
of two nodes collide (none of our tests use them); kube-proxy knows itself as the first node
(``internalTrafficPolicy: Local`` sees only its endpoints); every kubelet (its cAdvisor, eviction
manager) watches the whole machine, and each node reports the machine's full CPU and memory, so
N nodes schedule N times what the machine has. kubelet keeps its device-plugin socket in
/var/lib/kubelet whatever its root dir: the kubelets take it from one another, harmless without
device plugins. The nodes share the machine's file system, so a hostPath or local-path volume
is the same directory on every node (see README "Checkpoint storage on a cluster of several nodes").

Images: the cluster pulls nothing. containerd runs with an HTTP(S) proxy of 127.0.0.1:9, so a
pull of an image that was not loaded fails at once instead of reaching out; push podman images
in with ``dev/cluster load IMAGE...`` (:meth:`KubeCluster.load`) and refer to them by the same
name (``localhost/...``) with ``imagePullPolicy: IfNotPresent`` (or Never).

Choices and quirks (found on a Firecracker VM, kernel 6.18, cgroup v1 with an empty unified
hierarchy, containerd 1.6.20, runc 1.1.5):

* cgroup v1: kubelet runs with ``failCgroupV1: false`` and the cgroupfs driver (containerd 1.6
  has no RuntimeConfig RPC, kubelet then uses its configured driver; runc with SystemdCgroup=false).
* root has no CAP_SYS_RESOURCE there, so no process may lower its oom_score_adj: runc failed every
  pod sandbox (kubelet asks -998) with "can't get final child's PID from pipe". containerd runs
  with ``restrict_oom_score_adj = true`` (never below its own 0), kubelet and kube-proxy with
  oom-score-adj 0 (see ``_oom_score_adj``: -999 where the capability exists).
* the nofile hard limit is 20000: kubelet's maxOpenFiles is the hard limit rather than 1000000.
* kubelet sets kernel tunables (vm.overcommit_memory=1, kernel.panic=10, panic_on_oops=1, keys
  limits); kube-proxy is told to leave conntrack sysctls alone; the bridge plugin turns on
  ip_forward. ``down`` restores what ``up`` saved (ip_forward stays on while another bridge,
  e.g. podman's, exists).
* kube-proxy: nftables mode, see ``_proxy_mode``.
* names outside the cluster: CoreDNS has no ``forward``, kubelet's resolv.conf has no nameserver,
  containerd pulls through a dead proxy, and the guard drops forwarding from the pod bridge to the
  uplink: nothing in the cluster reaches outside this machine. Pods reach the host (node IP) and
  each other; no masquerading but kube-proxy's own (hairpin, host -> ClusterIP).
* containerd 1.6 keeps shim sockets in /run/containerd/s and CNI results in /var/lib/cni whatever
  its root and state; kubelet its device-plugin socket in /var/lib/kubelet and log links in
  /var/log/containers: ``down`` removes what is the cluster's there (see HOST_DIRS).
* ``dev/cluster up`` with warm caches: ~15 s into a new state dir (4 images imported ~4 s), ~7 s
  again on the same one; ``down`` ~4 s. The components take ~700 MB of memory.
* several nodes in one network namespace: kube-proxy in nftables mode and the guard see traffic
  between bridges as forwarded; the guard drops only what leaves through the uplink.
* ``dev/cluster up --nodes 2`` into a new state dir: 18.9 s (the 4 images saved once, imported
  into each containerd: 8.3 s), while a test suite ran on the machine; tests/e2e
  test_cluster_nodes.py and test_cluster_smoke.py on it: 10 passed in 44 s;
  the flight-delays run on S3 across the nodes: 3 passed in 8 min 14 s; on a ReadWriteOnce
  local-path checkpoint claim (the operator's affinity put all ten pods on one of the two nodes):
  4 passed in 8 min 21 s. ``down --purge``: 12.3 s (3.4 s down, 8.9 s purge). Since stop 36 the
  e2e suite runs on two nodes (tests/kube/cluster_fixtures.py DEFAULT_NODES); in `.ci/run` with
  a cold toolchain: test_flight_delays_claim.py 121 s of setup and 158 s for January,
  test_flight_delays_cluster.py 192 s for January, 64 s the deleted driver, 248 s the upgrade.

This module is standard library only and also a script (``dev/cluster`` runs it), so it can be
started without the project's virtualenv.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import dataclasses
import errno
import fcntl
import json
import os
import pathlib
import platform
import re
import shlex
import shutil
import signal
import socket
import string
import subprocess
import sys
import time
import urllib.error
import urllib.request

# ------------------------------------------------------------------------------------------------
# Fixed layout of the cluster (one node)

CLUSTER_CIDR = "10.244.0.0/16"
POD_CIDR_OF_NODE = "10.244.{index}.0/24"    # node i's range (spec.podCIDR and its CNI config)
POD_GATEWAY_OF_NODE = "10.244.{index}.1"    # node i's bridge address
BRIDGE_OF_NODE = "streamlets{index}"        # node i's bridge
POD_CIDR = POD_CIDR_OF_NODE.format(index=0)  # the first node's
SERVICE_CIDR = "10.96.0.0/16"
API_SERVICE_IP = "10.96.0.1"       # first address of SERVICE_CIDR: the `kubernetes` Service
DNS_IP = "10.96.0.10"
CLUSTER_DOMAIN = "cluster.local"
BRIDGE = BRIDGE_OF_NODE.format(index=0)  # the first node's
CNI_NETWORK = "streamlets"         # the first node's; node i has streamlets-<i+1>
MAX_NODES = 8                      # memory: each node is a containerd and a kubelet (~150 MB)
NODE_PORT_STRIDE = 100             # node i's kubelet ports: PORTS[...] + i * NODE_PORT_STRIDE
NODE_CGROUP_PREFIX = "streamlets-node-"  # node i > 0: cgroupRoot /streamlets-node-<i+1>
GUARD_TABLE = "streamlets-cluster"  # nft table (family inet) of the egress guard
STORAGE_CLASS = "local-path"

PORTS = {  # all on the host; etcd, the controller-manager, the scheduler and kube-proxy on loopback
    "apiserver": 6443, "etcd": 2379, "etcd_peer": 2380, "kubelet": 10250, "kubelet_healthz": 10248,
    "controller_manager": 10257, "scheduler": 10259, "proxy_healthz": 10256, "proxy_metrics": 10249,
}
# the processes: KubeCluster.components (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kube-proxy, and per node a containerd and a kubelet: Node.proc)
ENV_KEYS = ("kube_apiserver", "kubectl", "etcd", "kubelet", "kube_controller_manager", "kube_scheduler",
            "kube_proxy")
IMAGE_KEYS = ("pause", "coredns", "local_path_provisioner", "busybox")
TOOLS = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "podman", "openssl", "ip", "mount", "setsid")
CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")
CNI_PLUGINS = ("bridge", "host-local", "loopback")

# Directories outside the state dir that containerd 1.6 (shim sockets, CNI result cache) and
# kubelet (device-plugin socket, container log links) use whatever they are told: down removes
# what the cluster left there, and the directories themselves when up found them missing.
HOST_DIRS = ("/run/containerd", "/var/lib/cni", "/var/lib/kubelet", "/var/log/containers")

RUN_DIR = pathlib.Path("/run/streamlets-cluster")  # the lock and the record of the running cluster
DEFAULT_STATE_DIR = pathlib.Path("/var/lib/streamlets-cluster")

# kernel settings kubelet (setupKernelTunables), kube-proxy (conntrack, route_localnet) and the
# bridge plugin (ip_forward) may change: saved by `up`, restored by `down`
SYSCTLS = ("net/ipv4/ip_forward", "net/ipv4/conf/all/route_localnet", "vm/overcommit_memory",
           "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys",
           "kernel/keys/root_maxbytes", "net/bridge/bridge-nf-call-iptables",
           "net/bridge/bridge-nf-call-ip6tables", "net/netfilter/nf_conntrack_max",
           "net/netfilter/nf_conntrack_tcp_timeout_established",
           "net/netfilter/nf_conntrack_tcp_timeout_close_wait")


class ClusterError(RuntimeError):
    """The cluster could not be started, stopped or used."""


class ClusterUnavailable(ClusterError):
    """Something the cluster needs is missing here (binaries, images, tools, root)."""


def cache_root() -> pathlib.Path:
    """$STREAMLETS_CACHE or ~/.cache/streamlets (as streamlets.cache, not imported: stdlib only)."""
    env = os.environ.get("STREAMLETS_CACHE")
    return pathlib.Path(env).expanduser() if env else pathlib.Path.home() / ".cache" / "streamlets"


def env_file() -> pathlib.Path:
    return cache_root() / "k8s" / "env.json"


def load_cluster_env(path: str | os.PathLike | None = None) -> dict:
    """What dev/k8s-env and dev/k8s-node-env recorded, checked: ClusterUnavailable saying what to
    run when something is missing."""
    path = pathlib.Path(path) if path else env_file()
    hint = ("run dev/k8s-node-env (builds kubelet, kube-controller-manager, kube-scheduler, kube-proxy, "
            "CoreDNS, local-path-provisioner and pause and makes their images; cached)")
    try:
        env = json.loads(path.read_text())
    except FileNotFoundError:
        raise ClusterUnavailable(f"{path} not found: {hint}") from None
    missing = [key for key in ENV_KEYS if not env.get(key) or not os.access(env[key], os.X_OK)]
    missing += [f"images.{key}" for key in IMAGE_KEYS if not env.get("images", {}).get(key)]
    if missing:
        raise ClusterUnavailable(f"{path} lacks {', '.join(missing)}: {hint}")
    return env


def check_host(env: dict | None = None) -> None:
    """ClusterUnavailable unless this machine can run the cluster: root, the tools, CNI plugins."""
    if os.geteuid() != 0:
        raise ClusterUnavailable("the cluster needs root (containerd, kubelet, network namespaces, nftables)")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if shutil.which("nft") is None and shutil.which("iptables") is None:
        missing.append("nft or iptables")
    if missing:
        raise ClusterUnavailable(f"missing on PATH: {', '.join(missing)} (dev/setup installs them)")
    if _cni_bin_dir() is None:
        raise ClusterUnavailable(f"CNI plugins {', '.join(CNI_PLUGINS)} not found in {' or '.join(CNI_BIN_DIRS)} "
                                 "(Debian: containernetworking-plugins)")
    if not pathlib.Path("/proc/sys/net/bridge").exists():
        raise ClusterUnavailable("br_netfilter is not available (/proc/sys/net/bridge missing)")


def _cni_bin_dir() -> str | None:
    for d in CNI_BIN_DIRS:
        if all(os.access(os.path.join(d, p), os.X_OK) for p in CNI_PLUGINS):
            return d
    return None


# ------------------------------------------------------------------------------------------------
# Small helpers


def _log(msg: str) -> None:
    print(msg, flush=True)


class _Steps:
    """Prints ``== step`` and its duration, and keeps the timings (cluster.json records them)."""

    def __init__(self, out=_log):
        self.out = out
        self.timings: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        self.out(f"== {name}")
        began = time.monotonic()
        try:
            yield
        finally:
            took = time.monotonic() - began
            self.timings[name] = round(took, 2)
            self.out(f"   ({took:.1f} s)")


def _run(argv, *, check=True, timeout=120, input=None, env=None, quiet=False) -> subprocess.CompletedProcess:
    res = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, input=input,
                         env=env)
    if check and res.returncode != 0:
        raise ClusterError(f"{shlex.join(str(a) for a in argv)} failed with code {res.returncode}:\n"
                           f"{(res.stderr.strip() or res.stdout.strip())[-3000:]}")
    return res


def _write(path: pathlib.Path, text: str, mode: int = 0o644) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    tmp.replace(path)
    return path


def _log_tail(path: pathlib.Path, lines: int = 30) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _proc_start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks), None if gone or a zombie."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _port_free(port: int, host: str = "0.0.0.0") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _sysctl_path(name: str) -> pathlib.Path:
    return pathlib.Path("/proc/sys") / name


def _read_sysctl(name: str) -> str | None:
    try:
        return _sysctl_path(name).read_text().strip()
    except OSError:
        return None


def _write_sysctl(name: str, value: str) -> None:
    with contextlib.suppress(OSError):
        _sysctl_path(name).write_text(value)


def discover_node_ip() -> tuple[str, str | None]:
    """(IPv4 address pods reach the host on, uplink interface or None): the source address of
    the default route (a route lookup: nothing is sent), else the first global address."""
    res = _run(["ip", "-4", "-o", "route", "get", "1.1.1.1"], check=False)
    m = re.search(r"\bsrc (\S+)", res.stdout)
    if res.returncode == 0 and m:
        dev = re.search(r"\bdev (\S+)", res.stdout)
        return m.group(1), dev.group(1) if dev else None
    res = _run(["ip", "-4", "-o", "addr", "show", "scope", "global"], check=False)
    for line in res.stdout.splitlines():
        parts = line.split()
        ifname, addr = parts[1], parts[3].split("/")[0]
        if not re.fullmatch(BRIDGE_OF_NODE.format(index=r"\d+"), ifname) and not ifname.startswith(
                ("cni", "podman", "veth", "docker")):
            return addr, None
    raise ClusterError("no IPv4 address found for the node (pass --node-ip)")


def node_name() -> str:
    name = socket.gethostname().split(".")[0].lower()
    name = re.sub(r"[^a-z0-9-]", "-", name).strip("-")
    return name or "node"


@dataclasses.dataclass(frozen=True)
class Node:
    """One worker node: its own containerd and kubelet in the host's network namespace (see
    "Several nodes" in the module docstring). Node 0 is laid out as the one node of a one-node
    cluster always was (same names, paths, ports, cgroups); node i > 0 differs in each of these:

    ==================  ==========================================  ================================
    what                node 0                                      node i > 0
    ==================  ==========================================  ================================
    name                the host's (node_name())                    <host>-<i+1>
    state               <state>/containerd, kubelet, cni, ...       <state>/nodes/<name>/...
    processes, logs     containerd, kubelet                         containerd-<i+1>, kubelet-<i+1>
    pod CIDR (spec)     10.244.0.0/24, gateway .1 on streamlets0    10.244.i.0/24 on streamlets<i>
    CNI network         streamlets                                  streamlets-<i+1>
    kubelet ports       10250 (API), 10248 (healthz)                + i * NODE_PORT_STRIDE
    kubelet cgroupRoot  / (pods in /kubepods)                       /streamlets-node-<i+1>
    ==================  ==========================================  ================================
    """

    index: int
    name: str
    dir: pathlib.Path  # its containerd/, kubelet/, cni/, pod-logs/, run/images.json

    @classmethod
    def of(cls, state_dir: pathlib.Path, index: int, host: str | None = None) -> "Node":
        host = host or node_name()
        if index == 0:
            return cls(0, host, state_dir)
        name = f"{host}-{index + 1}"
        return cls(index, name, state_dir / "nodes" / name)

    @property
    def suffix(self) -> str:
        return "" if self.index == 0 else f"-{self.index + 1}"

    def proc(self, component: str) -> str:
        """Its process name (pid file, log) for "containerd" or "kubelet": kubelet-2."""
        return component + self.suffix

    @property
    def pod_cidr(self) -> str:
        return POD_CIDR_OF_NODE.format(index=self.index)

    @property
    def gateway(self) -> str:
        return POD_GATEWAY_OF_NODE.format(index=self.index)

    @property
    def bridge(self) -> str:
        return BRIDGE_OF_NODE.format(index=self.index)

    @property
    def cni_network(self) -> str:
        return CNI_NETWORK + self.suffix

    @property
    def kubelet_port(self) -> int:
        return PORTS["kubelet"] + self.index * NODE_PORT_STRIDE

    @property
    def healthz_port(self) -> int:
        return PORTS["kubelet_healthz"] + self.index * NODE_PORT_STRIDE

    @property
    def cgroup_root(self) -> str:
        """kubelet's cgroupRoot: its pods go to <cgroupRoot>/kubepods in every hierarchy."""
        return "/" if self.index == 0 else f"/{NODE_CGROUP_PREFIX}{self.index + 1}"

    @property
    def kubepods(self) -> str:
        """The cgroup (relative to a hierarchy's root) holding this node's pods."""
        return os.path.join(self.cgroup_root, "kubepods").lstrip("/")

    @property
    def containerd_dir(self) -> pathlib.Path:
        return self.dir / "containerd"

    @property
    def containerd_socket(self) -> pathlib.Path:
        return self.containerd_dir / "containerd.sock"

    @property
    def kubelet_dir(self) -> pathlib.Path:
        return self.dir / "kubelet"

    @property
    def cni_dir(self) -> pathlib.Path:
        return self.dir / "cni"

    @property
    def images_record(self) -> pathlib.Path:
        """{image name: podman image id} of what was imported into its containerd."""
        return self.dir / "run" / "images.json"

    def describe(self) -> dict:
        return {"name": self.name, "pod_cidr": self.pod_cidr, "bridge": self.bridge, "cni_network": self.cni_network,
                "kubelet_port": self.kubelet_port, "cgroup_root": self.cgroup_root,
                "containerd_socket": str(self.containerd_socket), "dir": str(self.dir)}


def _go_arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le",
            "s390x": "s390x"}.get(machine, machine)


# ------------------------------------------------------------------------------------------------
# Processes: detached (own session, re-parented to init), identified by pid + start time


class _Procs:
    def __init__(self, run_dir: pathlib.Path, log_dir: pathlib.Path):
        self.run_dir, self.log_dir = run_dir, log_dir

    def pidfile(self, name: str) -> pathlib.Path:
        return self.run_dir / f"{name}.pid"

    def log(self, name: str) -> pathlib.Path:
        return self.log_dir / f"{name}.log"

    def spawn(self, name: str, argv: list, env: dict | None = None, cwd: pathlib.Path | None = None) -> int:
        """Start argv detached (setsid --fork: a new session, parent init), output appended to
        logs/<name>.log; returns its pid (also in run/<name>.pid with its start time)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        raw = self.run_dir / f"{name}.rawpid"
        raw.unlink(missing_ok=True)
        with open(self.log(name), "ab") as out:
            out.write(f"\n---- {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(str(a) for a in argv)}\n".encode())
            out.flush()
            # the shell writes its pid, then execs the program (same pid)
            subprocess.run(["setsid", "--fork", "/bin/sh", "-c", 'echo $$ > "$0"; exec "$@"', str(raw),
                            *map(str, argv)], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                           env=env, cwd=cwd, check=True, close_fds=True)
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError, ValueError):
                pid = int(raw.read_text())
                break
            if time.monotonic() > deadline:
                raise ClusterError(f"{name} did not start (no pid in {raw}); see {self.log(name)}")
            time.sleep(0.01)
        start = _proc_start_time(pid)
        raw.unlink(missing_ok=True)
        _write(self.pidfile(name), json.dumps({"pid": pid, "start": start, "argv": [str(a) for a in argv]}))
        return pid

    def pid(self, name: str) -> int | None:
        """The pid of a running <name> started by spawn, else None (gone, zombie or reused)."""
        try:
            rec = json.loads(self.pidfile(name).read_text())
        except (OSError, ValueError):
            return None
        start = _proc_start_time(rec["pid"])
        if start is None or (rec.get("start") is not None and start != rec["start"]):
            return None
        return rec["pid"]

    def alive(self, name: str) -> bool:
        return self.pid(name) is not None

    def stop(self, name: str, timeout: float = 15, sig: int = signal.SIGTERM) -> None:
        pid = self.pid(name)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            deadline = time.monotonic() + timeout
            while self.pid(name) is not None and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.pid(name) is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 5
                while self.pid(name) is not None and time.monotonic() < deadline:
                    time.sleep(0.05)
        self.pidfile(name).unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------------
# PKI (openssl): one CA for everything


class _Pki:
    def __init__(self, d: pathlib.Path):
        self.dir = d

    def path(self, name: str, ext: str = "crt") -> pathlib.Path:
        return self.dir / f"{name}.{ext}"

    def _openssl(self, *args) -> None:
        _run(["openssl", *args], timeout=60)

    def ca(self, name: str = "ca", cn: str = "streamlets-cluster-ca") -> None:
        if self.path(name).exists() and self.path(name, "key").exists():
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        self._openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                      "-out", self.path(name, "key"))
        self._openssl("req", "-x509", "-new", "-key", self.path(name, "key"), "-days", "3650",
                      "-subj", f"/CN={cn}", "-out", self.path(name),
                      "-addext", "basicConstraints=critical,CA:TRUE",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature")

    def cert(self, name: str, cn: str, *, orgs: tuple[str, ...] = (), dns: tuple[str, ...] = (),
             ips: tuple[str, ...] = (), server: bool = False, client: bool = True, ca: str = "ca") -> None:
        """A key pair signed by the CA; re-issued when subject or SANs changed (node IP)."""
        spec = json.dumps({"cn": cn, "orgs": orgs, "dns": dns, "ips": ips, "server": server, "client": client,
                           "ca": ca})
        specfile = self.path(name, "spec")
        if self.path(name).exists() and specfile.exists() and specfile.read_text() == spec:
            return
        subj = "".join(f"/O={o}" for o in orgs) + f"/CN={cn}"
        usages = [u for u, on in (("serverAuth", server), ("clientAuth", client)) if on]
        ext = ["basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment",
               f"extendedKeyUsage={','.join(usages)}"]
        sans = [f"DNS:{d}" for d in dns] + [f"IP:{i}" for i in ips]
        if sans:
            ext.append(f"subjectAltName={','.join(sans)}")
        extfile = self.path(name, "ext")
        extfile.write_text("\n".join(ext) + "\n")
        key, csr = self.path(name, "key"), self.path(name, "csr")
        if not key.exists():
            self._openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key)
        self._openssl("req", "-new", "-key", key, "-subj", subj, "-out", csr)
        self._openssl("x509", "-req", "-in", csr, "-CA", self.path(ca), "-CAkey", self.path(ca, "key"),
                      "-CAcreateserial", "-days", "3650", "-extfile", extfile, "-out", self.path(name))
        csr.unlink()
        extfile.unlink()
        specfile.write_text(spec)

    def service_account_key(self) -> None:
        key, pub = self.path("sa", "key"), self.path("sa", "pub")
        if key.exists() and pub.exists():
            return
        self._openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key)
        self._openssl("pkey", "-in", key, "-pubout", "-out", pub)


# ------------------------------------------------------------------------------------------------
# Manifests of the addons


ADDONS = string.Template("""\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: streamlets:kube-apiserver-kubelet-client
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:kubelet-api-admin}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects:
- {kind: ServiceAccount, name: coredns, namespace: kube-system}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  # No `forward`: nothing outside the cluster is asked. cluster.local (and reverse zones) from
  # the API; the nodes' names (the host, e.g. for a Kafka broker there) from `hosts`; any other
  # name gets SERVFAIL.
  Corefile: |
    $domain:53 in-addr.arpa:53 ip6.arpa:53 {
        errors
        health {
            lameduck 5s
        }
        ready
        kubernetes $domain in-addr.arpa ip6.arpa {
            pods insecure
            ttl 30
        }
        prometheus :9153
        cache 30
        reload
        loadbalance
    }
    .:53 {
        errors
        hosts {
            $node_ip $node_names
        }
        cache 30
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 1
  selector:
    matchLabels: {k8s-app: kube-dns}
  template:
    metadata:
      labels: {k8s-app: kube-dns}
    spec:
      priorityClassName: system-cluster-critical
      serviceAccountName: coredns
      dnsPolicy: Default
      tolerations:
      - {key: CriticalAddonsOnly, operator: Exists}
      containers:
      - name: coredns
        image: $coredns_image
        imagePullPolicy: IfNotPresent
        args: [-conf, /etc/coredns/Corefile]
        resources:
          requests: {cpu: 10m, memory: 32Mi}
          limits: {memory: 128Mi}
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        - {name: metrics, containerPort: 9153, protocol: TCP}
        volumeMounts:
        - {name: config-volume, mountPath: /etc/coredns, readOnly: true}
        securityContext:
          allowPrivilegeEscalation: false
          capabilities: {add: [NET_BIND_SERVICE], drop: [ALL]}
          readOnlyRootFilesystem: true
        livenessProbe:
          httpGet: {path: /health, port: 8080}
          initialDelaySeconds: 10
          timeoutSeconds: 5
          failureThreshold: 5
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
      volumes:
      - name: config-volume
        configMap:
          name: coredns
          items: [{key: Corefile, path: Corefile}]
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: CoreDNS}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: $dns_ip
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
  - {name: metrics, port: 9153, protocol: TCP}
---
apiVersion: v1
kind: Namespace
metadata: {name: local-path-storage}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: local-path-provisioner-service-account, namespace: local-path-storage}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: local-path-provisioner-role, namespace: local-path-storage}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, patch, update, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: local-path-provisioner-role}
rules:
- apiGroups: [""]
  resources: [nodes, persistentvolumeclaims, configmaps, pods, pods/log]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [persistentvolumes]
  verbs: [get, list, watch, create, patch, update, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [storage.k8s.io]
  resources: [storageclasses]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: local-path-provisioner-bind, namespace: local-path-storage}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: local-path-provisioner-role}
subjects:
- {kind: ServiceAccount, name: local-path-provisioner-service-account, namespace: local-path-storage}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: local-path-provisioner-bind}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: local-path-provisioner-role}
subjects:
- {kind: ServiceAccount, name: local-path-provisioner-service-account, namespace: local-path-storage}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: local-path-provisioner, namespace: local-path-storage}
spec:
  replicas: 1
  selector:
    matchLabels: {app: local-path-provisioner}
  template:
    metadata:
      labels: {app: local-path-provisioner}
    spec:
      priorityClassName: system-cluster-critical
      serviceAccountName: local-path-provisioner-service-account
      containers:
      - name: local-path-provisioner
        image: $lpp_image
        imagePullPolicy: IfNotPresent
        command: [local-path-provisioner, start, --config, /etc/config/config.json,
                  --service-account-name, local-path-provisioner-service-account,
                  --provisioner-name, rancher.io/local-path, --helper-image, $busybox_image,
                  --configmap-name, local-path-config]
        resources:
          requests: {cpu: 10m, memory: 32Mi}
          limits: {memory: 128Mi}
        volumeMounts:
        - {name: config-volume, mountPath: /etc/config/}
        env:
        - name: POD_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        - {name: CONFIG_MOUNT_PATH, value: /etc/config/}
      volumes:
      - name: config-volume
        configMap: {name: local-path-config}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $storage_class
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
---
apiVersion: v1
kind: ConfigMap
metadata: {name: local-path-config, namespace: local-path-storage}
data:
  config.json: |-
    {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["$local_path"]}]}
  setup: |-
    #!/bin/sh
    set -eu
    mkdir -m 0777 -p "$$VOL_DIR"
  teardown: |-
    #!/bin/sh
    set -eu
    rm -rf "$$VOL_DIR"
  helperPod.yaml: |-
    apiVersion: v1
    kind: Pod
    metadata:
      name: helper-pod
    spec:
      priorityClassName: system-node-critical
      tolerations:
      - {key: node.kubernetes.io/disk-pressure, operator: Exists, effect: NoSchedule}
      containers:
      - name: helper-pod
        image: $busybox_image
        imagePullPolicy: IfNotPresent
        resources:
          requests: {cpu: 10m, memory: 16Mi}
""")


# ------------------------------------------------------------------------------------------------
# The cluster


class KubeCluster:
    """A cluster of ``nodes`` worker nodes (1 to MAX_NODES) whose state lives in ``state_dir``
    (see the module docstring).

    Layout: ``pki/`` (CA, certificates, service-account key), ``*.kubeconfig`` (``admin.kubeconfig``
    for you), ``etcd/``, ``containerd/`` (config, root with the images, state, socket), ``cni/``
    (network config, IPAM), ``kubelet/``, ``pod-logs/``, ``local-path/`` (volumes), ``logs/``
    (one log per component, ``up.log``), ``run/`` (pid files, saved sysctls, loaded images),
    ``cluster.json`` (addresses and paths, written when the cluster is up), ``nodes.json`` (the
    number of nodes, written by up: down and status read it). The first node's containerd, cni,
    kubelet and pod-logs are those of the state dir; node i > 0 has its own under
    ``nodes/<name>/`` (:class:`Node`).

    ``nodes`` None: as recorded in ``nodes.json`` by the last up, else 1. ClusterError from up
    when the cluster is up with another number of nodes.
    """

    def __init__(self, state_dir: str | os.PathLike | None = None, *, env: dict | None = None,
                 node_ip: str | None = None, nodes: int | None = None, out=_log):
        self.state_dir = pathlib.Path(state_dir or default_state_dir()).absolute()
        self._env = env
        self._node_ip_override = node_ip
        if nodes is not None and not 1 <= nodes <= MAX_NODES:
            raise ClusterError(f"nodes must be 1 to {MAX_NODES}, not {nodes}")
        self._nodes_asked = nodes
        self.out = out
        self.procs = _Procs(self.state_dir / "run", self.state_dir / "logs")
        self.pki = _Pki(self.state_dir / "pki")

    @property
    def nodes_file(self) -> pathlib.Path:
        return self.state_dir / "nodes.json"

    def _recorded_nodes(self) -> int | None:
        try:
            return int(json.loads(self.nodes_file.read_text())["nodes"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @property
    def node_count(self) -> int:
        return self._nodes_asked or self._recorded_nodes() or 1

    @property
    def nodes(self) -> list[Node]:
        """The worker nodes, node 0 first."""
        host = getattr(self, "_node", None) or node_name()
        return [Node.of(self.state_dir, i, host) for i in range(self.node_count)]

    @property
    def components(self) -> tuple[str, ...]:
        """Every process of the cluster (pid file names): the control plane, kube-proxy, and a
        containerd and a kubelet per node."""
        nodes = self.nodes
        return ("etcd", "kube-apiserver", *(n.proc("containerd") for n in nodes), "kube-controller-manager",
                "kube-scheduler", *(n.proc("kubelet") for n in nodes), "kube-proxy")

    # --------------------------------------------------------------------------------------------
    # Paths and facts

    @property
    def env(self) -> dict:
        if self._env is None:
            self._env = load_cluster_env()
        return self._env

    @property
    def kubeconfig(self) -> pathlib.Path:
        return self.state_dir / "admin.kubeconfig"

    @property
    def info_file(self) -> pathlib.Path:
        return self.state_dir / "cluster.json"

    @property
    def containerd_socket(self) -> pathlib.Path:
        """The first node's containerd (each node has its own: Node.containerd_socket)."""
        return self.nodes[0].containerd_socket

    @property
    def local_path_dir(self) -> pathlib.Path:
        return self.state_dir / "local-path"

    def info(self) -> dict:
        """cluster.json: kubeconfig, server, node name and IP, CIDRs, DNS IP, ... ({} before up)."""
        try:
            return json.loads(self.info_file.read_text())
        except (OSError, ValueError):
            return {}

    @property
    def node_ip(self) -> str:
        """The host's address as pods see it: a server on the host listening on 0.0.0.0 (or on
        this address) is reachable from pods at it."""
        return self.info().get("node_ip") or self._node_ip_override or discover_node_ip()[0]

    def subprocess_env(self) -> dict[str, str]:
        """os.environ plus KUBECONFIG and PATH starting with the cluster's kubectl (and helm)."""
        dirs = [self.env["bin_dir"]] + ([os.path.dirname(self.env["helm"])] if self.env.get("helm") else [])
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig),
                "PATH": os.pathsep.join(dirs + [os.environ.get("PATH", "")]),
                "KUBECACHEDIR": str(self.state_dir / "kube-cache")}

    # --------------------------------------------------------------------------------------------
    # Lifecycle

    def is_up(self) -> bool:
        return all(self.procs.alive(c) for c in self.components) and self.info_file.exists()

    def up(self, timeout: float = 300, *, watch_pid: int | None = None, watch_purge: bool = False,
           keep_on_failure: bool = False) -> "KubeCluster":
        """Start the cluster (nothing if it is already up) and wait until the node is Ready and
        CoreDNS and local-path-provisioner are available. ``watch_pid``: also start a watcher that
        takes the cluster down (``watch_purge``: and deletes its state) when that process ends
        (the test session's pid)."""
        env = self.env
        check_host(env)
        with _global_lock():
            active = _active_state_dir()
            if active and active != self.state_dir:
                other = KubeCluster(active, env=env, out=self.out)
                if other.any_alive():
                    raise ClusterError(f"another cluster is up (state dir {active}); stop it first: "
                                       f"dev/cluster down --state-dir {active}")
                self.out(f"cleaning up after the cluster of {active} (it died without down)")
                other._down(steps=None)
            recorded = self._recorded_nodes() or 1
            if self._nodes_asked and self._nodes_asked != recorded and KubeCluster(
                    self.state_dir, env=env, nodes=recorded, out=self.out).any_alive():
                raise ClusterError(f"the cluster of {self.state_dir} is up with {recorded} node(s), not "
                                   f"{self._nodes_asked}: dev/cluster down --state-dir {self.state_dir} first")
            if self.is_up():
                self.out(f"cluster already up (state dir {self.state_dir}, kubeconfig {self.kubeconfig})")
                if watch_pid:
                    self._start_watcher(watch_pid, watch_purge)
                return self
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self.procs.log_dir.mkdir(parents=True, exist_ok=True)
            steps = _Steps(self._tee(self.procs.log("up")))
            began = time.monotonic()
            try:
                if self.any_alive() or (self.state_dir / "run" / "sysctls.json").exists():
                    with steps("clean up what a previous run left (down)"):
                        KubeCluster(self.state_dir, env=env, nodes=recorded, out=self.out)._down(steps=None)
                _write(self.nodes_file, json.dumps({"nodes": self.node_count}) + "\n")
                _record_active(self.state_dir)
                self._up(steps, began + timeout)
            except BaseException:
                if not keep_on_failure:
                    self.out("start failed: taking down what was started (logs kept in "
                             f"{self.procs.log_dir})")
                    with contextlib.suppress(Exception):
                        self._down(steps=None)
                raise
            total = time.monotonic() - began
            self._write_info(steps.timings, total)
            steps.out(f"cluster up in {total:.1f} s: export KUBECONFIG={self.kubeconfig}")
        if watch_pid:
            self._start_watcher(watch_pid, watch_purge)
        return self

    def down(self, *, purge: bool = False) -> None:
        """Stop everything and clean up the machine; ``purge`` also deletes the state (etcd,
        images, volumes, certificates) but the logs."""
        with _global_lock():
            steps = _Steps(self._tee(self.procs.log("up")) if self.procs.log_dir.exists() else self.out)
            began = time.monotonic()
            self._down(steps)
            if purge:
                with steps(f"purge {self.state_dir} (logs kept)"):
                    self._purge()
            steps.out(f"cluster down in {time.monotonic() - began:.1f} s")

    def any_alive(self) -> bool:
        return any(self.procs.alive(c) for c in (*self.components, "watch"))

    def _tee(self, path: pathlib.Path):
        def out(msg: str) -> None:
            self.out(msg)
            with open(path, "a") as f:
                f.write(msg + "\n")
        return out

    # --------------------------------------------------------------------------------------------
    # up

    def _up(self, steps: _Steps, deadline: float) -> None:
        env = self.env
        s = self.state_dir
        ip, uplink = (self._node_ip_override, None) if self._node_ip_override else discover_node_ip()
        if self._node_ip_override:
            uplink = discover_node_ip()[1]
        self._ip, self._uplink, self._node = ip, uplink, node_name()
        self._proxy_mode = _proxy_mode()
        nodes = self.nodes
        steps.out(f"   node{'s' if len(nodes) > 1 else ''} {', '.join(n.name for n in nodes)}, IP {ip} "
                  f"(uplink {uplink}), state dir {s}")

        with steps("preflight: ports, images in podman"):
            ports = {**PORTS, **{f"{n.proc(k)}": port for n in nodes[1:]
                                 for k, port in (("kubelet", n.kubelet_port), ("kubelet_healthz", n.healthz_port))}}
            busy = [f"{name} {port}" for name, port in ports.items() if not _port_free(port)]
            if busy:
                raise ClusterError(f"ports in use: {', '.join(busy)} (another Kubernetes on this machine?)")
            missing = [img for img in env["images"].values() if not _podman_has(img)]
            if missing:
                raise ClusterUnavailable(f"podman images missing: {', '.join(missing)}: run dev/k8s-node-env")

        with steps("certificates and kubeconfigs (pki/, reused)"):
            self._pki_and_kubeconfigs()

        with steps("kernel settings (saved for down), egress guard"):
            self._save_sysctls()
            _write_sysctl("net/bridge/bridge-nf-call-iptables", "1")
            _write_sysctl("net/bridge/bridge-nf-call-ip6tables", "1")
            _write_sysctl("net/ipv4/ip_forward", "1")  # pod -> ClusterIP -> pod is routed
            self._guard_up()

        with steps("etcd"):
            self._start_etcd()
            self._wait("etcd", lambda: _http_ok(f"http://127.0.0.1:{PORTS['etcd']}/health"), deadline)

        containerds = tuple(n.proc("containerd") for n in nodes)
        kubelets = tuple(n.proc("kubelet") for n in nodes)
        with steps("kube-apiserver (started), containerd, images into containerd"):
            self._start_apiserver()
            for node in nodes:
                self._start_containerd(node)
            for node in nodes:
                self._wait(node.proc("containerd"), lambda node=node: self._containerd_ready(node), deadline)
            self._import_images(list(env["images"].values()), nodes)

        with steps("kube-apiserver ready"):
            self._wait("kube-apiserver", self._apiserver_ready, deadline)
            self._register_nodes(nodes, create=len(nodes) > 1)

        with steps("kube-controller-manager, kube-scheduler, kubelet, kube-proxy, addons"):
            self._start_controller_manager()
            self._start_scheduler()
            self._kubelet_started = time.time()
            for node in nodes:
                self._start_kubelet(node)
            self._start_proxy()
            self._apply_addons()

        with steps("node Ready" if len(nodes) == 1 else f"{len(nodes)} nodes Ready"):
            self._wait(kubelets[0], self._node_ready, deadline,
                       also=(*kubelets[1:], *containerds, "kube-proxy", "kube-controller-manager"))

        with steps("CoreDNS and local-path-provisioner available"):
            self._wait("addons", self._addons_available, deadline,
                       also=(*kubelets, *containerds, "kube-proxy", "kube-scheduler", "kube-controller-manager"))

    def _register_nodes(self, nodes: list[Node], create: bool) -> None:
        """Delete the Nodes an earlier run on this state dir left that are not ``nodes`` or have
        another pod range; then (``create``: several nodes) create the missing Node objects
        before their kubelets start, each with its pod CIDR (spec.podCIDR, which
        kube-controller-manager's range allocator then only marks as used): node i always has
        10.244.i.0/24, the range its bridge CNI config hands out, whichever kubelet registers
        first. A kubelet finds its Node there and takes it over (as after a restart). One node
        registers itself as before (the allocator gives the first node 10.244.0.0/24)."""
        wanted = {n.name: n for n in nodes}
        status, body = self.get("/api/v1/nodes")
        if status != 200:
            raise ClusterError(f"listing nodes: HTTP {status} {body[-300:]!r}")
        for item in json.loads(body).get("items", []):
            name = item["metadata"]["name"]
            node = wanted.get(name)
            if node is not None and (item.get("spec", {}).get("podCIDR") == node.pod_cidr or not create):
                wanted.pop(name)
                continue
            self.out(f"   deleting Node {name} of an earlier run (pod CIDR {item.get('spec', {}).get('podCIDR')})")
            self.kubectl("delete", "node", name, "--wait=true", "--timeout=60s", check=True)
        arch = _go_arch()
        for node in wanted.values() if create else ():
            labels = {"kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": arch,
                      "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": arch}
            self.kubectl("create", "-f", "-", check=True, input=json.dumps({
                "apiVersion": "v1", "kind": "Node", "metadata": {"name": node.name, "labels": labels},
                # not-ready until its kubelet says Ready (as a kubelet registers itself); the node
                # lifecycle controller takes the taint off then
                "spec": {"podCIDR": node.pod_cidr, "podCIDRs": [node.pod_cidr],
                         "taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}}))

    def _pki_and_kubeconfigs(self) -> None:
        p, ip, node = self.pki, self._ip, self._node
        p.ca()
        p.ca("front-proxy-ca", "streamlets-front-proxy-ca")  # aggregation layer (requestheader auth)
        p.cert("front-proxy-client", "front-proxy-client", ca="front-proxy-ca")
        p.service_account_key()
        p.cert("apiserver", "kube-apiserver", server=True, client=False,
               dns=("kubernetes", "kubernetes.default", "kubernetes.default.svc",
                    f"kubernetes.default.svc.{CLUSTER_DOMAIN}", "localhost", node),
               ips=("127.0.0.1", ip, API_SERVICE_IP))
        p.cert("apiserver-kubelet-client", "kube-apiserver-kubelet-client")
        p.cert("admin", "kubernetes-admin", orgs=("system:masters",))
        p.cert("controller-manager", "system:kube-controller-manager")
        p.cert("scheduler", "system:kube-scheduler")
        p.cert("kube-proxy", "system:kube-proxy")
        for n in self.nodes:  # node 0: kubelet-client, kubelet-server, kubelet.kubeconfig; node 2: ...-2
            p.cert(f"kubelet-client{n.suffix}", f"system:node:{n.name}", orgs=("system:nodes",))
            p.cert(f"kubelet-server{n.suffix}", n.name, server=True, client=False, dns=(n.name, "localhost"),
                   ips=(ip, "127.0.0.1"))
        server = f"https://127.0.0.1:{PORTS['apiserver']}"
        for name, cert, embed in (("admin", "admin", True), ("controller-manager", "controller-manager", False),
                                  ("scheduler", "scheduler", False), ("kube-proxy", "kube-proxy", False),
                                  *((f"kubelet{n.suffix}", f"kubelet-client{n.suffix}", False) for n in self.nodes)):
            self._write_kubeconfig(self.state_dir / f"{name}.kubeconfig", server, cert, embed)

    def _write_kubeconfig(self, path: pathlib.Path, server: str, cert: str, embed: bool) -> None:
        p = self.pki

        def data(f: pathlib.Path) -> str:
            return base64.b64encode(f.read_bytes()).decode()

        cluster = {"server": server}
        user = {}
        if embed:  # self-contained: copy it anywhere
            cluster["certificate-authority-data"] = data(p.path("ca"))
            user = {"client-certificate-data": data(p.path(cert)), "client-key-data": data(p.path(cert, "key"))}
        else:
            cluster["certificate-authority"] = str(p.path("ca"))
            user = {"client-certificate": str(p.path(cert)), "client-key": str(p.path(cert, "key"))}
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "streamlets", "preferences": {},
                  "clusters": [{"name": "streamlets", "cluster": cluster}],
                  "users": [{"name": cert, "user": user}],
                  "contexts": [{"name": "streamlets", "context": {"cluster": "streamlets", "user": cert,
                                                                   "namespace": "default"}}]}
        _write(path, json.dumps(config, indent=2) + "\n", 0o600)

    # ---- processes

    def _start_etcd(self) -> None:
        client, peer = f"http://127.0.0.1:{PORTS['etcd']}", f"http://127.0.0.1:{PORTS['etcd_peer']}"
        self.procs.spawn("etcd", [
            self.env["etcd"], "--name=streamlets", f"--data-dir={self.state_dir / 'etcd'}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=streamlets={peer}", "--listen-metrics-urls=", "--log-level=warn",
            "--unsafe-no-fsync",  # test data: fsync makes a slow disk slower still
            "--quota-backend-bytes=2147483648"])

    def _start_apiserver(self) -> None:
        p = self.pki
        self.procs.spawn("kube-apiserver", [
            self.env["kube_apiserver"],
            f"--etcd-servers=http://127.0.0.1:{PORTS['etcd']}",
            "--bind-address=0.0.0.0", f"--advertise-address={self._ip}", f"--secure-port={PORTS['apiserver']}",
            f"--cert-dir={self.state_dir / 'pki' / 'apiserver-generated'}",
            f"--tls-cert-file={p.path('apiserver')}", f"--tls-private-key-file={p.path('apiserver', 'key')}",
            f"--client-ca-file={p.path('ca')}",
            f"--kubelet-client-certificate={p.path('apiserver-kubelet-client')}",
            f"--kubelet-client-key={p.path('apiserver-kubelet-client', 'key')}",
            f"--kubelet-certificate-authority={p.path('ca')}",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            f"--requestheader-client-ca-file={p.path('front-proxy-ca')}",
            "--requestheader-allowed-names=front-proxy-client", "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group", "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={p.path('front-proxy-client')}",
            f"--proxy-client-key-file={p.path('front-proxy-client', 'key')}",
            "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
            f"--service-account-issuer=https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
            f"--service-account-key-file={p.path('sa', 'pub')}",
            f"--service-account-signing-key-file={p.path('sa', 'key')}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true", "--profiling=false", "--v=1"])

    def _start_controller_manager(self) -> None:
        p, kc = self.pki, self.state_dir / "controller-manager.kubeconfig"
        self.procs.spawn("kube-controller-manager", [
            self.env["kube_controller_manager"],
            f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1", f"--secure-port={PORTS['controller_manager']}", "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--root-ca-file={p.path('ca')}", f"--service-account-private-key-file={p.path('sa', 'key')}",
            f"--cluster-signing-cert-file={p.path('ca')}", f"--cluster-signing-key-file={p.path('ca', 'key')}",
            "--allocate-node-cidrs=true", f"--cluster-cidr={CLUSTER_CIDR}", "--node-cidr-mask-size=24",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--profiling=false", "--v=1"])

    def _start_scheduler(self) -> None:
        kc = self.state_dir / "scheduler.kubeconfig"
        self.procs.spawn("kube-scheduler", [
            self.env["kube_scheduler"],
            f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1", f"--secure-port={PORTS['scheduler']}", "--leader-elect=false",
            "--profiling=false", "--v=1"])

    def _containerd_config(self, node: Node) -> str:
        c = node.containerd_dir
        return f"""\
# containerd of node {node.name} of the streamlets cluster: own root, state, socket; nothing
# shared with a system containerd nor with the other nodes' (a kubelet removes the pod sandboxes
# it does not know of: two kubelets must never share a containerd)
version = 2
root = "{c / 'root'}"
state = "{c / 'state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.tracing.processor.v1.otlp",
                    "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{node.containerd_socket}"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "{c / 'opt'}"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "{self.env['images']['pause']}"
    netns_mounts_under_state_dir = true
    # oom_score_adj never below containerd's own (0): lowering it needs CAP_SYS_RESOURCE, which
    # some sandboxes (Firecracker VMs) do not give even to root; runc would fail every sandbox
    restrict_oom_score_adj = true
    disable_apparmor = true
    enable_selinux = false
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    max_container_log_line_size = 16384
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      discard_unpacked_layers = false
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "{c / 'runc'}"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "{_cni_bin_dir()}"
      conf_dir = "{node.cni_dir / 'net.d'}"
      max_conf_num = 1
"""

    def _cni_config(self, node: Node) -> str:
        """A bridge of the node's own (streamlets<i>) with its pod CIDR. The bridges of all nodes
        are in the host's network namespace: the host routes between them (ip_forward), so pods
        of different nodes reach each other by their own addresses, no overlay or NAT."""
        return json.dumps({
            "cniVersion": "1.0.0", "name": node.cni_network,
            "plugins": [{
                "type": "bridge", "bridge": node.bridge, "isGateway": True, "ipMasq": False, "hairpinMode": True,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": node.pod_cidr, "gateway": node.gateway}]],
                         "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(node.cni_dir / "ipam")},
            }],
        }, indent=2) + "\n"

    def _start_containerd(self, node: Node) -> None:
        c = node.containerd_dir
        for d in ("root", "state", "opt", "runc"):
            (c / d).mkdir(parents=True, exist_ok=True)
        _write(node.cni_dir / "net.d" / "10-streamlets.conflist", self._cni_config(node))
        config = _write(c / "config.toml", self._containerd_config(node))
        # Pulls go through a proxy that is not there: an image nobody loaded fails at once
        # instead of reaching a registry (loopback registries are never proxied).
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
               "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
               "NO_PROXY": "localhost,127.0.0.1", "TMPDIR": str(c / "tmp")}
        (c / "tmp").mkdir(exist_ok=True)
        self.procs.spawn(node.proc("containerd"), ["containerd", f"--config={config}", "--log-level=warn"], env=env)

    def _start_kubelet(self, node: Node) -> None:
        k, p = node.kubelet_dir, self.pki
        k.mkdir(parents=True, exist_ok=True)
        if node.index > 0:
            _make_cgroup(node.cgroup_root)
        resolv = _write(k / "resolv.conf", "# no nameserver: pods (dnsPolicy ClusterFirst) get CoreDNS, "
                                           "and nothing outside is ever asked\n")
        try:
            import resource
            nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        except (ImportError, ValueError):
            nofile = 1000000
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "failCgroupV1": False, "cgroupDriver": "cgroupfs", "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{node.containerd_socket}",
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                               "x509": {"clientCAFile": str(p.path("ca"))}},
            "authorization": {"mode": "Webhook"},
            "address": self._ip, "port": node.kubelet_port, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": node.healthz_port,
            "tlsCertFile": str(p.path(f"kubelet-server{node.suffix}")),
            "tlsPrivateKeyFile": str(p.path(f"kubelet-server{node.suffix}", "key")),
            "rotateCertificates": False, "serverTLSBootstrap": False,
            "clusterDNS": [DNS_IP], "clusterDomain": CLUSTER_DOMAIN, "resolvConf": str(resolv),
            "podLogsDir": str(node.dir / "pod-logs"),
            # little reserved: 2 cores and ~10 small Spark pods must fit
            "systemReserved": {"cpu": "50m", "memory": "256Mi"},
            "enforceNodeAllocatable": ["pods"],
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%",
                             "imagefs.available": "1%", "imagefs.inodesFree": "1%"},
            # the images cannot be pulled again: never garbage-collect them
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "maxOpenFiles": nofile, "maxPods": 110, "serializeImagePulls": False,
            "shutdownGracePeriod": "0s", "shutdownGracePeriodCriticalPods": "0s",
            "nodeStatusUpdateFrequency": "5s", "syncFrequency": "10s",
            "fileCheckFrequency": "20s", "registerNode": True, "protectKernelDefaults": False,
            "logging": {"verbosity": 1},
        }
        if node.index > 0:  # node 0 keeps the default "/" (pods in /kubepods)
            config["cgroupRoot"] = node.cgroup_root
        cfg = _write(k / "config.json", json.dumps(config, indent=2) + "\n")
        self.procs.spawn(node.proc("kubelet"), [
            self.env["kubelet"], f"--config={cfg}", f"--kubeconfig={self.state_dir / f'kubelet{node.suffix}.kubeconfig'}",
            f"--root-dir={k / 'root'}", f"--cert-dir={k / 'pki'}", f"--hostname-override={node.name}",
            f"--node-ip={self._ip}", f"--oom-score-adj={_oom_score_adj()}"], cwd=k)

    def _start_proxy(self) -> None:
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self.state_dir / "kube-proxy.kubeconfig")},
            "mode": self._proxy_mode, "clusterCIDR": CLUSTER_CIDR, "hostnameOverride": self._node,
            "healthzBindAddress": f"127.0.0.1:{PORTS['proxy_healthz']}",
            "metricsBindAddress": f"127.0.0.1:{PORTS['proxy_metrics']}",
            # leave the host's conntrack table size and timeouts alone
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
            "iptables": {"localhostNodePorts": False},  # else route_localnet=1 (iptables mode)
            "nodePortAddresses": ["primary"],
            "oomScoreAdj": _oom_score_adj(),
        }
        cfg = _write(self.state_dir / "kube-proxy" / "config.json", json.dumps(config, indent=2) + "\n")
        self.procs.spawn("kube-proxy", [self.env["kube_proxy"], f"--config={cfg}", "--v=1"])

    # ---- readiness

    def _wait(self, what: str, ready, deadline: float, also: tuple[str, ...] = ()) -> None:
        components = self.components
        names = [n for n in (what, *also) if n in components]
        last = None
        while True:
            for name in names:
                if not self.procs.alive(name):
                    raise ClusterError(f"{name} exited; see {self.procs.log(name)}\n{_log_tail(self.procs.log(name))}")
            try:
                result = ready()
                if result is True:
                    return
                last = result
            except Exception as e:  # noqa: BLE001 - anything means "not yet"
                last = e
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {self.procs.log(n)}\n{_log_tail(self.procs.log(n), 15)}" for n in names)
                raise ClusterError(f"{what} not ready in time (last: {last})\n{logs}")
            time.sleep(0.25)

    def _containerd_ready(self, node: Node | None = None):
        node = node or self.nodes[0]
        return node.containerd_socket.exists() and self._ctr("version", check=False, node=node).returncode == 0

    def _apiserver_ready(self):
        status, body = self.get("/readyz")
        if status != 200:
            return f"/readyz: HTTP {status} {body[-300:]!r}"
        status, _ = self.get("/api/v1/namespaces/default")
        return True if status == 200 else f"namespace default: HTTP {status}"

    def _node_ready(self):
        """True when every node is Ready by a heartbeat of its kubelet of this run."""
        waiting = []
        for node in self.nodes:
            status, body = self.get(f"/api/v1/nodes/{node.name}")
            if status != 200:
                waiting.append(f"node {node.name}: HTTP {status}")
                continue
            conds = {c["type"]: c for c in json.loads(body).get("status", {}).get("conditions", [])}
            ready = conds.get("Ready", {})
            if ready.get("status") != "True":
                waiting.append(f"node {node.name} Ready={ready.get('status')}: {ready.get('message')}")
                continue
            # a node left in etcd by an earlier run is Ready until it times out: this kubelet's heartbeat
            if _utc_seconds(ready.get("lastHeartbeatTime")) < self._kubelet_started - 2:
                waiting.append(f"node {node.name}: status not yet posted by this kubelet")
        return True if not waiting else "; ".join(waiting)

    def _addons_available(self):
        """A pod of each addon Ready since this kubelet started (the API may still show the
        pods and Deployments of an earlier run as available)."""
        waiting = []
        for ns, selector in (("kube-system", "k8s-app=kube-dns"), ("local-path-storage", "app=local-path-provisioner")):
            status, body = self.get(f"/api/v1/namespaces/{ns}/pods?labelSelector={selector}")
            pods = json.loads(body).get("items", []) if status == 200 else []
            if not any(self._ready_since_start(pod) for pod in pods):
                waiting.append(f"{ns} {selector}")
        if waiting:
            return f"waiting for {', '.join(waiting)}: {self._pod_summary()}"
        return True

    def _ready_since_start(self, pod: dict) -> bool:
        for cond in pod.get("status", {}).get("conditions", []):
            if cond.get("type") == "Ready" and cond.get("status") == "True":
                return _utc_seconds(cond.get("lastTransitionTime")) >= self._kubelet_started - 2
        return False

    def _pod_summary(self) -> str:
        status, body = self.get("/api/v1/pods")
        if status != 200:
            return f"pods: HTTP {status}"
        out = []
        for pod in json.loads(body).get("items", []):
            st = pod.get("status", {})
            why = [cs.get("state", {}).get("waiting", {}).get("reason") for cs in st.get("containerStatuses", [])]
            out.append(f"{pod['metadata']['namespace']}/{pod['metadata']['name']} {st.get('phase')} "
                       f"{','.join(w for w in why if w)}")
        return "; ".join(out) or "no pods"

    # ---- addons

    def _apply_addons(self) -> None:
        images = self.env["images"]
        text = ADDONS.substitute(domain=CLUSTER_DOMAIN, node_ip=self._ip, dns_ip=DNS_IP,
                                 node_names=" ".join(n.name for n in self.nodes),
                                 coredns_image=images["coredns"], lpp_image=images["local_path_provisioner"],
                                 busybox_image=images["busybox"], storage_class=STORAGE_CLASS,
                                 local_path=str(self.local_path_dir))
        self.local_path_dir.mkdir(parents=True, exist_ok=True)
        path = _write(self.state_dir / "addons.yaml", text)
        deadline = time.monotonic() + 60
        while True:  # the controller-manager may still be creating the namespaces' service accounts
            res = self.kubectl("apply", "-f", str(path))
            if res.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"kubectl apply -f {path} failed:\n{res.stderr}")
            time.sleep(1)

    # ---- images

    def _ctr(self, *args, check=True, timeout=600, input=None, node: Node | None = None):
        """ctr against a node's containerd (default the first), namespace k8s.io."""
        socket_path = (node or self.nodes[0]).containerd_socket
        return _run(["ctr", f"--address={socket_path}", "--namespace=k8s.io", *args],
                    check=check, timeout=timeout, input=input)

    def _loaded(self, node: Node | None = None) -> dict:
        try:
            return json.loads((node or self.nodes[0]).images_record.read_text())
        except (OSError, ValueError):
            return {}

    def _import_images(self, images: list[str], nodes: list[Node] | None = None, force: bool = False,
                       verbose: bool = False) -> list[str]:
        """podman save | ctr import into each node's containerd (default: every node), for each
        image not yet there under the same podman image id; returns the images imported (into
        one node at least). With several nodes to import into, the archive is saved once to a
        file under run/ and imported from it into each (deleted after)."""
        nodes = self.nodes if nodes is None else nodes
        done = []
        for given in images:
            image, image_id = _podman_resolve(given)
            if image_id is None:
                raise ClusterError(f"podman has no image {given} (CONTAINERS_CONF={_containers_conf()})")
            todo = []
            for node in nodes:
                have = set(self._ctr("images", "ls", "-q", node=node).stdout.split())
                loaded = self._loaded(node)
                if not force and image in have and loaded.get(image) == image_id:
                    if verbose:
                        self.out(f"   {image} already loaded{self._on(node)}")
                    continue
                # Another name of the same podman image is in already (a new tag): containerd names
                # the same content once more instead of reading the whole archive again.
                twin = None if force else next((n for n, i in loaded.items() if i == image_id and n != image
                                                and n in have), None)
                if twin:
                    began = time.monotonic()
                    self._ctr("images", "tag", "--force", twin, image, node=node)
                    self._record_loaded(node, image, image_id)
                    self.out(f"   {image} tagged as {twin}{self._on(node)} ({time.monotonic() - began:.1f} s)")
                    continue
                todo.append(node)
            if not todo:
                continue
            done.append(image)
            if len(todo) == 1:
                began = time.monotonic()
                self._podman_save(image, None, todo[0])
                self._record_loaded(todo[0], image, image_id)
                self.out(f"   {image} loaded{self._on(todo[0])} ({time.monotonic() - began:.1f} s)")
                continue
            archive = self.state_dir / "run" / "load.oci.tar"
            try:
                began = time.monotonic()
                self._podman_save(image, archive, None)
                self.out(f"   {image} saved ({time.monotonic() - began:.1f} s)")
                for node in todo:
                    began = time.monotonic()
                    self._ctr_import(image, archive, node)
                    self._record_loaded(node, image, image_id)
                    self.out(f"   {image} loaded{self._on(node)} ({time.monotonic() - began:.1f} s)")
            finally:
                archive.unlink(missing_ok=True)
        return done

    def _on(self, node: Node) -> str:
        return f" on {node.name}" if self.node_count > 1 else ""

    def _record_loaded(self, node: Node, image: str, image_id: str) -> None:
        loaded = self._loaded(node)
        loaded[image] = image_id
        _write(node.images_record, json.dumps(loaded, indent=2))

    def _podman_save(self, image: str, archive: pathlib.Path | None, node: Node | None) -> None:
        """podman save of ``image`` (oci-archive) into ``archive``, or straight into ``node``'s
        containerd (a pipe to ctr import)."""
        with open(self.procs.log("load"), "w+b") as err:  # a file: a full stderr pipe would block podman
            argv = ["podman", "save", "--format", "oci-archive", image]
            if archive is not None:
                archive.parent.mkdir(parents=True, exist_ok=True)
                archive.unlink(missing_ok=True)
                rc = subprocess.run([*argv, "--output", str(archive)], stdout=subprocess.DEVNULL, stderr=err,
                                    env=_podman_env(), timeout=1800).returncode
                ctr = None
            else:
                assert node is not None
                saving = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=_podman_env())
                assert saving.stdout is not None
                ctr = subprocess.run(["ctr", f"--address={node.containerd_socket}", "--namespace=k8s.io",
                                      "images", "import", "--snapshotter=overlayfs", "-"],
                                     stdin=saving.stdout, capture_output=True, text=True, timeout=1800)
                saving.stdout.close()
                rc = saving.wait()
            err.seek(0)
            perr = err.read().decode(errors="replace")
        if rc != 0 or (ctr is not None and ctr.returncode != 0):
            raise ClusterError(f"loading {image} failed: podman save: {rc} {perr.strip()[-500:]}"
                               + (f"; ctr import: {ctr.returncode} {(ctr.stderr or ctr.stdout).strip()[-500:]}"
                                  if ctr is not None else ""))
        if node is not None:
            self._check_imported(image, node, ctr.stdout if ctr is not None else "")

    def _ctr_import(self, image: str, archive: pathlib.Path, node: Node) -> None:
        res = self._ctr("images", "import", "--snapshotter=overlayfs", str(archive), node=node, timeout=1800,
                        check=False)
        if res.returncode != 0:
            raise ClusterError(f"loading {image}{self._on(node)} failed: ctr import: {res.returncode} "
                               f"{(res.stderr or res.stdout).strip()[-500:]}")
        self._check_imported(image, node, res.stdout)

    def _check_imported(self, image: str, node: Node, ctr_out: str) -> None:
        if image not in set(self._ctr("images", "ls", "-q", node=node).stdout.split()):
            raise ClusterError(f"ctr imported {image}{self._on(node)} under another name: {ctr_out.strip()}")

    def load(self, *images: str, force: bool = False) -> list[str]:
        """Push podman images (root storage) into every node's containerd; an image already
        loaded there with the same podman id is skipped. Returns the images imported."""
        for node in self.nodes:
            if not self.procs.alive(node.proc("containerd")) or not self._containerd_ready(node):
                raise ClusterError(f"the cluster is not up (state dir {self.state_dir}, {node.proc('containerd')} "
                                   "not running): dev/cluster up")
        return self._import_images(list(images), force=force, verbose=True)

    # ---- network

    def _guard_up(self) -> None:
        """Drop whatever pods would forward out of the uplink (no NAT for them either: nothing
        may leave the machine)."""
        if not self._uplink or shutil.which("nft") is None:
            return
        bridges = ", ".join(f'"{n.bridge}"' for n in self.nodes)
        _run(["nft", "-f", "-"], input=f"""\
table inet {GUARD_TABLE} {{}}
delete table inet {GUARD_TABLE}
table inet {GUARD_TABLE} {{
  chain forward {{
    type filter hook forward priority filter - 10; policy accept;
    iifname {{ {bridges} }} oifname "{self._uplink}" counter drop
  }}
}}
""")

    def _save_sysctls(self) -> None:
        """Save the kernel settings (and the nftables tables that exist) for down to restore."""
        saved = self.state_dir / "run" / "sysctls.json"
        if not saved.exists():
            values = {name: v for name in SYSCTLS if (v := _read_sysctl(name)) is not None}
            _write(saved, json.dumps(values, indent=2))
        tables = self.state_dir / "run" / "nft-tables.json"
        if not tables.exists() and shutil.which("nft"):
            _write(tables, json.dumps(sorted(_nft_tables())))
        dirs = self.state_dir / "run" / "host-dirs.json"
        if not dirs.exists():
            _write(dirs, json.dumps([d for d in HOST_DIRS if os.path.exists(d)]))

    # --------------------------------------------------------------------------------------------
    # down

    def _down(self, steps: _Steps | None) -> None:
        @contextlib.contextmanager
        def step(name):
            if steps is None:
                yield
            else:
                with steps(name):
                    yield

        watcher = self.procs.pid("watch")
        if watcher is not None and watcher != os.getpid():
            self.procs.stop("watch", timeout=2)
        nodes = self.nodes
        with step("stop kubelet, kube-proxy, kube-scheduler, kube-controller-manager"):
            for name in (*(n.proc("kubelet") for n in nodes), "kube-proxy", "kube-scheduler",
                         "kube-controller-manager"):
                self.procs.stop(name)
        netns = set()
        self._container_ids: set[str] = set()
        with step("kill the pods, remove their containers, stop containerd"):
            self._kill_pods()
            for node in nodes:
                netns |= self._remove_containers(node)
                self.procs.stop(node.proc("containerd"), timeout=10)
                self._kill_shims(node)
        with step("stop kube-apiserver and etcd"):
            self.procs.stop("kube-apiserver")
            self.procs.stop("etcd")
        with step("unmount, network namespaces, bridge, nftables/iptables rules, cgroups, sysctls"):
            self._unmount_all(netns)
            self._remove_links()
            self._remove_rules()
            for node in nodes:
                _run(["rm", "-rf", str(node.cni_dir / "ipam")], check=False)
            self._remove_cgroups()
            self._clean_host_dirs(self._container_ids)
            self._restore_sysctls()
        self.info_file.unlink(missing_ok=True)
        _clear_active(self.state_dir)

    def _kill_pods(self) -> None:
        """SIGKILL every process in the nodes' kubepods cgroups (all pod containers), until none is left."""
        deadline = time.monotonic() + 15
        tops = [n.kubepods for n in self.nodes]
        while True:
            pids = set().union(*(_cgroup_pids(top) for top in tops))
            if not pids or time.monotonic() > deadline:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)

    def _remove_containers(self, node: Node) -> set[str]:
        """With the node's containerd still up: delete every task and container of k8s.io (so a
        later up starts clean); returns the network namespace paths the pod sandboxes used."""
        netns: set[str] = set()
        if not self.procs.alive(node.proc("containerd")) or not node.containerd_socket.exists():
            return netns
        res = self._ctr("containers", "ls", "-q", check=False, timeout=30, node=node)
        ids = res.stdout.split() if res.returncode == 0 else []
        for cid in ids:
            info = self._ctr("containers", "info", cid, check=False, timeout=30, node=node)
            with contextlib.suppress(ValueError, KeyError, TypeError):
                spec = json.loads(info.stdout)["Spec"]
                for ns in spec.get("linux", {}).get("namespaces", []):
                    if ns.get("type") == "network" and ns.get("path"):
                        netns.add(ns["path"])
            self._ctr("tasks", "kill", "--signal=SIGKILL", cid, check=False, timeout=30, node=node)
        for cid in ids:
            self._ctr("tasks", "delete", "--force", cid, check=False, timeout=30, node=node)
            self._ctr("containers", "delete", cid, check=False, timeout=30, node=node)
        self._container_ids |= set(ids)
        return netns

    def _kill_shims(self, node: Node) -> None:
        needle = str(node.containerd_socket).encode()
        for entry in pathlib.Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"containerd-shim" in cmdline and needle in cmdline.split(b"\0"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry.name), signal.SIGKILL)

    def _unmount_all(self, netns: set[str]) -> None:
        """Unmount (deepest first; lazily when busy) everything under the state dir, plus the
        sandboxes' network namespaces wherever containerd put them, and delete those files."""
        prefix = str(self.state_dir) + "/"
        for _ in range(3):
            targets = [m for m in _mountpoints() if m.startswith(prefix) or m in netns]
            if not targets:
                break
            for m in sorted(targets, key=lambda m: m.count("/"), reverse=True):
                _umount(m)
        for path in netns:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def _remove_links(self) -> None:
        existing = set(_bridges())
        for bridge in (n.bridge for n in self.nodes):
            if bridge not in existing:
                continue
            res = _run(["ip", "-o", "link", "show", "master", bridge], check=False)
            for line in res.stdout.splitlines():
                name = line.split(":")[1].strip().split("@")[0]
                _run(["ip", "link", "delete", name], check=False)
            _run(["ip", "link", "delete", bridge], check=False)

    def _remove_rules(self) -> None:
        """kube-proxy --cleanup (its nftables tables and iptables chains), the guard, the KUBE-*
        chains kubelet keeps in iptables (canaries, KUBE-FIREWALL), conntrack entries of the
        cluster's addresses."""
        proxy = self.env.get("kube_proxy")
        if proxy and os.access(proxy, os.X_OK):
            _run([proxy, "--cleanup", "--v=0"], check=False, timeout=60)
        if shutil.which("nft"):
            for family in ("ip", "ip6"):
                _run(["nft", "delete", "table", family, "kube-proxy"], check=False)
            _run(["nft", "delete", "table", "inet", GUARD_TABLE], check=False)
        for tool in ("iptables", "ip6tables"):
            if shutil.which(tool):
                _remove_kube_chains(tool)
        # iptables-nft makes a table (ip6 nat, ip mangle, ...) on first use, e.g. for kubelet's
        # canary chains: drop those that did not exist before up and are empty now
        saved = self.state_dir / "run" / "nft-tables.json"
        if saved.exists() and shutil.which("nft"):
            with contextlib.suppress(ValueError):
                before = {tuple(t) for t in json.loads(saved.read_text())}
                for family, name in _nft_tables() - before:
                    if _nft_table_empty(family, name):
                        _run(["nft", "delete", "table", family, name], check=False)
            saved.unlink(missing_ok=True)
        if shutil.which("conntrack"):
            for args in (("-s", CLUSTER_CIDR), ("-d", CLUSTER_CIDR), ("-d", SERVICE_CIDR)):
                _run(["conntrack", "-D", *args], check=False)

    def _clean_host_dirs(self, container_ids: set[str]) -> None:
        results = pathlib.Path("/var/lib/cni/results")
        if results.is_dir():
            for f in results.iterdir():
                parts = f.name.split("-")
                if f.name.startswith(f"{CNI_NETWORK}-") or (f.name.startswith("cni-loopback-")
                                                              and len(parts) > 2 and parts[2] in container_ids):
                    f.unlink(missing_ok=True)
        links = pathlib.Path("/var/log/containers")
        if links.is_dir():
            for f in links.iterdir():
                with contextlib.suppress(OSError):
                    if f.is_symlink() and (os.readlink(f).startswith(str(self.state_dir) + "/") or not f.exists()):
                        f.unlink()
        saved = self.state_dir / "run" / "host-dirs.json"
        try:
            existed = set(json.loads(saved.read_text()))
        except (OSError, ValueError):
            return
        for d in HOST_DIRS:
            if d in existed or not os.path.isdir(d):
                continue
            if d == "/var/lib/kubelet":  # what kubelet keeps there whatever its --root-dir
                for name in ("kubelet.sock", "kubelet_internal_checkpoint", "DEPRECATION"):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(d, "device-plugins", name))
            for root, _dirs, _files in os.walk(d, topdown=False):
                with contextlib.suppress(OSError):
                    os.rmdir(root)  # only empty ones: anything someone else put there stays
        saved.unlink(missing_ok=True)

    def _remove_cgroups(self) -> None:
        """The nodes' cgroups in every hierarchy: /kubepods (node 0), /streamlets-node-<i+1>."""
        root = pathlib.Path("/sys/fs/cgroup")
        tops = [n.kubepods if n.index == 0 else n.cgroup_root.lstrip("/") for n in self.nodes]
        for hierarchy, name in ((h, t) for h in root.iterdir() for t in tops):
            top = hierarchy / name
            if not top.is_dir():
                continue
            # os.walk, not rglob: pods' cgroups vanish while this walks (rglob raised FileNotFoundError)
            dirs = sorted((pathlib.Path(d) for d, _, _ in os.walk(top)), key=lambda p: len(p.parts), reverse=True)
            for d in [*dirs, top]:
                with contextlib.suppress(OSError):
                    d.rmdir()

    def _restore_sysctls(self) -> None:
        saved = self.state_dir / "run" / "sysctls.json"
        try:
            values = json.loads(saved.read_text())
        except (OSError, ValueError):
            return
        ours = {n.bridge for n in self.nodes}
        other_bridges = [b for b in _bridges() if b not in ours]
        for name, value in values.items():
            if name == "net/ipv4/ip_forward" and value == "0" and other_bridges:
                continue  # podman's networks (cni-podman0, ...) need forwarding too: leave it on
            if _read_sysctl(name) != value:
                _write_sysctl(name, value)
        saved.unlink(missing_ok=True)

    def _purge(self) -> None:
        for entry in self.state_dir.iterdir():
            if entry.name == "logs":
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
                if entry.exists():  # something still mounted: unmount and try again
                    self._unmount_all(set())
                    shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)

    # --------------------------------------------------------------------------------------------
    # Watcher: takes the cluster down when a process (the test session) ends

    def _start_watcher(self, pid: int, purge: bool = False) -> None:
        self.procs.stop("watch", timeout=2)
        self.procs.spawn("watch", [sys.executable, os.path.abspath(__file__), "_watch",
                                   f"--state-dir={self.state_dir}", f"--pid={pid}", *(["--purge"] if purge else [])])

    def _watch(self, pid: int, purge: bool = False) -> None:
        start = _proc_start_time(pid)
        while True:
            time.sleep(1)
            if not self.info_file.exists() and not self.any_alive_besides_watch():
                return  # taken down by someone else
            now = _proc_start_time(pid)
            if now is None or now != start:
                self.out(f"process {pid} ended: taking the cluster down")
                self.down(purge=purge)
                return

    def any_alive_besides_watch(self) -> bool:
        return any(self.procs.alive(c) for c in self.components)

    # --------------------------------------------------------------------------------------------
    # Status and clients

    def status(self) -> dict:
        """{state_dir, up, components: {process: state}, nodes: {name: Ready status},
        node_details: {name: {ready, pod_cidr, kubelet_port, containerd, kubelet, pods}}, pods,
        info (cluster.json)}; nodes and pods only while the apiserver answers."""
        comps = {c: self.procs.pid(c) for c in self.components}
        states = {c: (f"running, pid {p}" if p else "stopped") for c, p in comps.items()}
        if self.procs.alive("watch"):
            states["watch"] = f"running, pid {self.procs.pid('watch')}"
        out: dict = {"state_dir": str(self.state_dir), "up": self.is_up(), "components": states}
        details: dict[str, dict] = {n.name: {"pod_cidr": n.pod_cidr, "kubelet_port": n.kubelet_port,
                            "containerd": states[n.proc("containerd")], "kubelet": states[n.proc("kubelet")]}
                   for n in self.nodes}
        out["node_details"] = details
        if comps["kube-apiserver"] and self.kubeconfig.exists():
            with contextlib.suppress(Exception):
                status, body = self.get("/api/v1/nodes")
                if status == 200:
                    out["nodes"] = {
                        n["metadata"]["name"]: next((c["status"] for c in n["status"].get("conditions", [])
                                                     if c["type"] == "Ready"), "Unknown")
                        for n in json.loads(body)["items"]}
                    for name, ready in out["nodes"].items():
                        details.setdefault(name, {})["ready"] = ready
                status, body = self.get("/api/v1/pods")
                if status == 200:
                    for pod in json.loads(body)["items"]:
                        on = pod.get("spec", {}).get("nodeName")
                        if on in details and pod.get("status", {}).get("phase") == "Running":
                            details[on]["pods"] = details[on].get("pods", 0) + 1
                out["pods"] = self._pod_summary()
        info = self.info()
        if info:
            out["info"] = info
        return out

    def get(self, path: str, timeout: float = 5) -> tuple[int, bytes]:
        """GET ``path`` from the apiserver as the admin (client certificate): (status, body)."""
        import ssl
        p = self.pki
        ctx = ssl.create_default_context(cafile=str(p.path("ca")))
        ctx.load_cert_chain(str(p.path("admin")), str(p.path("admin", "key")))
        req = urllib.request.Request(f"https://127.0.0.1:{PORTS['apiserver']}{path}")
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def kubectl(self, *args: str, check: bool = False, input: str | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess:
        """Run the built kubectl as the admin; output captured as text."""
        argv = [self.env["kubectl"], f"--kubeconfig={self.kubeconfig}", *args]
        res = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=timeout,
                             env=self.subprocess_env())
        if check and res.returncode != 0:
            raise ClusterError(f"kubectl {shlex.join(args)} failed with code {res.returncode}:\n"
                               f"{res.stderr.strip() or res.stdout.strip()}")
        return res

    def apply(self, manifest, namespace: str | None = None) -> str:
        """``kubectl apply`` of YAML/JSON text, a dict or a list of dicts; kubectl's output."""
        if not isinstance(manifest, str):
            items = manifest if isinstance(manifest, list) else [manifest]
            manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        ns = [f"--namespace={namespace}"] if namespace else []
        return self.kubectl("apply", *ns, "-f", "-", input=manifest, check=True).stdout

    @property
    def shared_volumes_dir(self) -> pathlib.Path:
        return self.state_dir / "shared-volumes"

    def shared_claim(self, namespace: str, name: str, size: str = "1Gi") -> pathlib.Path:
        """A PersistentVolumeClaim ``name`` in ``namespace`` that pods on every node may mount at
        once, read and write: bound to a static PersistentVolume ``<namespace>-<name>`` of type
        hostPath (accessModes ReadWriteMany, storageClassName "", reclaim Retain, no node
        affinity) on ``<state>/shared-volumes/<namespace>-<name>`` (mode 0777: any uid writes).
        Returns that directory. Honest here only: the nodes share this machine's file system, so
        the directory is the same on every node; a claim of the default StorageClass
        (local-path, ReadWriteOnce) pins all its pods to the node it was first used on instead.
        Not deleted with the namespace: ``down --purge`` deletes it with the state."""
        pv_name = f"{namespace}-{name}"
        path = self.shared_volumes_dir / pv_name
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o777)
        self.apply([
            {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name},
             "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteMany"],
                      "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                      "claimRef": {"namespace": namespace, "name": name},
                      "hostPath": {"path": str(path), "type": "Directory"}}},
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
             "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv_name,
                      "resources": {"requests": {"storage": size}}}},
        ])
        return path

    def wait_pod_done(self, namespace: str, name: str, timeout: float = 180) -> tuple[str, str]:
        """Wait until pod ``name`` Succeeded or Failed: (phase, its logs). ClusterError on timeout,
        with the pod's description."""
        deadline = time.monotonic() + timeout
        phase = None
        while time.monotonic() < deadline:
            res = self.kubectl("get", "pod", name, f"--namespace={namespace}", "-o", "jsonpath={.status.phase}")
            phase = res.stdout.strip()
            if phase in ("Succeeded", "Failed"):
                logs = self.kubectl("logs", name, f"--namespace={namespace}", "--all-containers").stdout
                return phase, logs
            time.sleep(0.5)
        described = self.kubectl("describe", "pod", name, f"--namespace={namespace}").stdout
        raise ClusterError(f"pod {namespace}/{name} still {phase} after {timeout:.0f}s:\n{described[-3000:]}")

    def api_client(self):
        """A kubernetes.client.ApiClient (the ``kubernetes`` package) for the admin."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def _write_info(self, timings: dict, total: float) -> None:
        env = self.env
        info = {
            "state_dir": str(self.state_dir),
            "kubeconfig": str(self.kubeconfig),
            "server": f"https://127.0.0.1:{PORTS['apiserver']}",
            "server_from_pods": f"https://{API_SERVICE_IP}:443",
            "ca_file": str(self.pki.path("ca")),
            "node_name": self._node,
            "node_ip": self._ip,
            "uplink": self._uplink,
            "pod_cidr": POD_CIDR,
            "nodes": [n.describe() for n in self.nodes],
            "cluster_cidr": CLUSTER_CIDR,
            "service_cidr": SERVICE_CIDR,
            "api_service_ip": API_SERVICE_IP,
            "dns_ip": DNS_IP,
            "cluster_domain": CLUSTER_DOMAIN,
            "bridge": BRIDGE,
            "storage_class": STORAGE_CLASS,
            "local_path_dir": str(self.local_path_dir),
            "kube_proxy_mode": self._proxy_mode,
            "containerd_socket": str(self.containerd_socket),
            "ports": PORTS,
            "images": env["images"],
            "versions": {k: env.get(k) for k in ("kubernetes_version", "etcd_version", "coredns_version",
                                                 "local_path_provisioner_version")},
            "logs": str(self.procs.log_dir),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "startup_seconds": round(total, 1),
            "step_seconds": timings,
        }
        _write(self.info_file, json.dumps(info, indent=2) + "\n")


# ------------------------------------------------------------------------------------------------
# Machine-level helpers


def default_state_dir() -> pathlib.Path:
    """$STREAMLETS_CLUSTER_DIR, else the running cluster's, else /var/lib/streamlets-cluster."""
    env = os.environ.get("STREAMLETS_CLUSTER_DIR")
    if env:
        return pathlib.Path(env)
    return _active_state_dir() or DEFAULT_STATE_DIR


@contextlib.contextmanager
def _global_lock():
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with open(RUN_DIR / "lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _active_state_dir() -> pathlib.Path | None:
    try:
        return pathlib.Path(json.loads((RUN_DIR / "active").read_text())["state_dir"])
    except (OSError, ValueError, KeyError):
        return None


def _record_active(state_dir: pathlib.Path) -> None:
    _write(RUN_DIR / "active", json.dumps({"state_dir": str(state_dir)}))


def _clear_active(state_dir: pathlib.Path) -> None:
    if _active_state_dir() == state_dir:
        (RUN_DIR / "active").unlink(missing_ok=True)


def _proxy_mode() -> str:
    """nftables when the nft tool is there: kube-proxy's rules then live in tables of their own
    (ip/ip6 kube-proxy), apart from podman's and anyone's iptables rules, and `down` just
    deletes them; the kernel (6.x) is well past the 5.13 it needs. Else iptables."""
    return "nftables" if shutil.which("nft") else "iptables"


def _oom_score_adj() -> int:
    """-999 (kubelet's and kube-proxy's default) when this process may lower its oom_score_adj,
    else 0: without CAP_SYS_RESOURCE (Firecracker VMs drop it even for root) the write fails."""
    try:
        with open("/proc/self/status") as f:
            eff = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError):
        return 0
    return -999 if eff & (1 << 24) else 0  # CAP_SYS_RESOURCE


def _containers_conf() -> str:
    return os.environ.get("CONTAINERS_CONF") or str(pathlib.Path(__file__).resolve().parent / "containers.conf")


def _podman_env() -> dict:
    return {**os.environ, "CONTAINERS_CONF": _containers_conf()}


def _podman_id(image: str) -> str | None:
    res = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", image], capture_output=True,
                         text=True, env=_podman_env(), timeout=120)
    return res.stdout.strip() if res.returncode == 0 else None


def _podman_resolve(image: str) -> tuple[str, str | None]:
    """(the full name podman knows ``image`` by, e.g. localhost/x:1 for x:1; its id or None)."""
    res = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}} {{join .RepoTags \" \"}}", image],
                         capture_output=True, text=True, env=_podman_env(), timeout=120)
    if res.returncode != 0 or not res.stdout.split():
        return image, None
    image_id, *tags = res.stdout.split()
    name = image if image in tags else next((t for t in tags if t.endswith("/" + image)), image)
    if ":" not in name.rsplit("/", 1)[-1] and "@" not in name:
        name += ":latest"
    return name, image_id


def _podman_has(image: str) -> bool:
    return _podman_id(image) is not None


def _utc_seconds(stamp: str | None) -> float:
    """Seconds since the epoch of an API timestamp (2024-01-02T03:04:05Z); 0 when missing."""
    import calendar
    if not stamp:
        return 0.0
    return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as resp:
        return resp.status == 200


def _mountpoints() -> list[str]:
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            out.append(re.sub(r"\\(\d{3})", lambda m: chr(int(m.group(1), 8)), mp))
    return out


_libc = None


def _umount(path: str) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.umount2(path.encode(), 0) != 0:
        err = ctypes.get_errno()
        if err in (errno.EBUSY,):
            _libc.umount2(path.encode(), 2)  # MNT_DETACH


def _cgroup_v1_mounts() -> list[pathlib.Path]:
    """The mount points of the cgroup v1 hierarchies (cpu, memory, ..., name=systemd)."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            fstype = fields[fields.index("-") + 1]
            if fstype == "cgroup":
                out.append(pathlib.Path(fields[4]))
    return out


def _make_cgroup(path: str) -> None:
    """Create cgroup ``path`` (e.g. /streamlets-node-2) in every v1 hierarchy: kubelet refuses a
    cgroupRoot that does not exist in each. In cpuset, the new group gets its parent's cpus and
    mems (an empty cpuset admits no task). On a cgroup v2 host (untested here: this machine is
    v1): the group in the unified root, with the root's controllers enabled for its children."""
    mounts = _cgroup_v1_mounts()
    for mount in mounts:
        d = mount / path.strip("/")
        d.mkdir(parents=True, exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            own, parent = d / name, d.parent / name
            if own.exists() and not own.read_text().strip():
                own.write_text(parent.read_text())
    unified = pathlib.Path("/sys/fs/cgroup")
    if not mounts and (unified / "cgroup.controllers").exists():
        d = unified / path.strip("/")
        d.mkdir(parents=True, exist_ok=True)
        for controller in (unified / "cgroup.subtree_control").read_text().split():
            with contextlib.suppress(OSError):
                (d / "cgroup.subtree_control").write_text(f"+{controller}")


def _cgroup_pids(top: str) -> set[int]:
    pids: set[int] = set()
    root = pathlib.Path("/sys/fs/cgroup")
    for hierarchy in ("pids", "memory", "cpu", "freezer", "systemd"):
        base = root / hierarchy / top
        if not base.is_dir():
            continue
        for d, _, files in os.walk(base):  # cgroups vanish while this walks: os.walk skips them
            if "cgroup.procs" in files:
                with contextlib.suppress(OSError, ValueError):
                    pids.update(int(x) for x in (pathlib.Path(d) / "cgroup.procs").read_text().split())
    pids.discard(os.getpid())
    return pids


def _bridges() -> list[str]:
    res = _run(["ip", "-o", "link", "show", "type", "bridge"], check=False)
    return [line.split(":")[1].strip().split("@")[0] for line in res.stdout.splitlines() if ":" in line]


def _nft_tables() -> set[tuple[str, str]]:
    res = _run(["nft", "list", "tables"], check=False)
    return {(p[1], p[2]) for line in res.stdout.splitlines() if len(p := line.split()) == 3 and p[0] == "table"}


def _nft_table_empty(family: str, name: str) -> bool:
    res = _run(["nft", "-j", "list", "table", family, name], check=False)
    try:
        items = json.loads(res.stdout)["nftables"]
    except (ValueError, KeyError):
        return False
    return res.returncode == 0 and not any(k in item for item in items for k in ("rule", "set", "map", "element"))


def _remove_kube_chains(tool: str) -> None:
    """Delete the KUBE-* chains (and the jumps to them) that kubelet and kube-proxy made."""
    for table in ("filter", "nat", "mangle"):
        res = _run([f"{tool}-save", "-t", table], check=False)
        if res.returncode != 0:
            continue
        chains = [line[1:].split()[0] for line in res.stdout.splitlines()
                  if line.startswith(":KUBE-")]
        if not chains:
            continue
        for line in res.stdout.splitlines():
            if line.startswith("-A ") and re.search(r"-j KUBE-", line) and not line.split()[1].startswith("KUBE-"):
                _run([tool, "-t", table, "-D", *shlex.split(line[3:])], check=False)
        for chain in chains:
            _run([tool, "-t", table, "-F", chain], check=False)
        for chain in chains:
            _run([tool, "-t", table, "-X", chain], check=False)


# ------------------------------------------------------------------------------------------------
# Command line (dev/cluster)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dev/cluster", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)

    def add(name, help_):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--state-dir", help="default: $STREAMLETS_CLUSTER_DIR, the running cluster's, "
                                           f"else {DEFAULT_STATE_DIR}")
        return p

    p = add("up", "start the cluster (nothing to do if it is up)")
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--nodes", type=int, help=f"worker nodes, 1 to {MAX_NODES} (default: as the last up of this "
                                              "state dir, else 1)")
    p.add_argument("--node-ip", help="the host address pods use (default: the default route's source)")
    p.add_argument("--keep-on-failure", action="store_true", help="leave the processes running if up fails")
    p.add_argument("--watch-pid", type=int, help="take the cluster down when this process ends")
    p = add("down", "stop the cluster and clean up the machine")
    p.add_argument("--purge", action="store_true", help="also delete the state (etcd, images, volumes), keep logs")
    p = add("status", "what runs; --json for all of cluster.json")
    p.add_argument("--json", action="store_true")
    p = add("load", "push podman images (root storage) into the cluster's containerd")
    p.add_argument("images", nargs="+")
    p.add_argument("--force", action="store_true", help="import even when already loaded")
    p = add("kubectl", "run kubectl against the cluster (admin)")
    p.add_argument("args", nargs=argparse.REMAINDER)
    add("env", "print shell exports (KUBECONFIG, PATH with kubectl)")
    p = sub.add_parser("_watch")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--purge", action="store_true")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["kubectl"]:  # everything after it is kubectl's (but a leading --state-dir)
        rest, state_dir = argv[1:], None
        if rest[:1] and rest[0].startswith("--state-dir"):
            state_dir, rest = (rest[0].split("=", 1)[1], rest[1:]) if "=" in rest[0] else (rest[1], rest[2:])
        argv = ["kubectl", *([f"--state-dir={state_dir}"] if state_dir else []), "--", *rest]
    args = parser.parse_args(argv)
    if args.cmd == "kubectl" and args.args[:1] == ["--"]:
        args.args = args.args[1:]

    try:
        cluster = KubeCluster(args.state_dir or None, node_ip=getattr(args, "node_ip", None),
                              nodes=getattr(args, "nodes", None))
        if args.cmd == "up":
            cluster.up(args.timeout, watch_pid=args.watch_pid, keep_on_failure=args.keep_on_failure)
        elif args.cmd == "down":
            if not cluster.state_dir.exists():
                print(f"nothing at {cluster.state_dir}")
                return 0
            cluster.down(purge=args.purge)
        elif args.cmd == "status":
            st = cluster.status()
            if args.json:
                print(json.dumps(st, indent=2))
            else:
                print(f"state dir {st['state_dir']}: {'up' if st['up'] else 'not up'}")
                for c, s in st["components"].items():
                    print(f"  {c:24} {s}")
                for n, d in st["node_details"].items():
                    print(f"  node {n}: Ready={d.get('ready', 'Unknown')}, pods {d.get('pod_cidr', '?')} "
                          f"({d.get('pods', 0)} running), kubelet :{d.get('kubelet_port', '?')} "
                          f"{d.get('kubelet', '?')}, containerd {d.get('containerd', '?')}")
                if "pods" in st:
                    print(f"  pods: {st['pods']}")
                if "info" in st:
                    i = st["info"]
                    print(f"  kubeconfig {i['kubeconfig']}\n  node IP {i['node_ip']}, pods {i['cluster_cidr']}, "
                          f"services {i['service_cidr']}, DNS {i['dns_ip']}, kube-proxy {i['kube_proxy_mode']}")
            return 0 if st["up"] else 3
        elif args.cmd == "load":
            began = time.monotonic()
            cluster.load(*args.images, force=args.force)
            print(f"({time.monotonic() - began:.1f} s)")
        elif args.cmd == "kubectl":
            os.execve(cluster.env["kubectl"], [cluster.env["kubectl"], f"--kubeconfig={cluster.kubeconfig}",
                                               *args.args], cluster.subprocess_env())
        elif args.cmd == "env":
            print(f"export KUBECONFIG={shlex.quote(str(cluster.kubeconfig))}")
            print(f"export PATH={shlex.quote(cluster.env['bin_dir'])}:$PATH")
        elif args.cmd == "_watch":
            cluster._watch(args.pid, args.purge)
    except ClusterError as e:
        print(f"dev/cluster {args.cmd}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
