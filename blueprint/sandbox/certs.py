"""Certificates for the secured sandbox broker (blueprint.sandbox.kafka_broker), made with openssl:
a CA, certificates it signs (a broker's, with the host names and addresses clients dial as
subjectAltName; clients' for mutual TLS), and the broker's PKCS#12 keystore.

Keys are EC P-256, unencrypted PKCS#8 PEM (what both librdkafka and Java's PEM key store read),
written with mode 0600. Each function leaves its files complete or absent (made in a temporary
folder, then moved), so a folder already made is reused as it is.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import BlueprintError

DAYS = 3650  # the sandbox's certificates do not expire during a rehearsal


class CertError(BlueprintError, RuntimeError):
    """openssl is missing or failed (its last lines in the message)."""


@dataclass(frozen=True)
class CertFiles:
    """A certificate (`cert`, PEM) and its private key (`key`, PKCS#8 PEM)."""

    cert: Path
    key: Path


def _openssl(*args: str, cwd: Path) -> None:
    tool = shutil.which("openssl")
    if tool is None:
        raise CertError("'openssl' not found on PATH; the secured Kafka sandbox makes its certificates with it")
    res = subprocess.run([tool, *args], cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-5:])
        raise CertError(f"openssl {args[0]} failed in {cwd} (exit {res.returncode}):\n{tail}")


def _publish(work: Path, folder: Path, names: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        os.chmod(work / name, 0o600 if name.endswith((".key", ".p12", ".password")) else 0o644)
        os.replace(work / name, folder / name)


def make_ca(folder: Path, name: str = "streamlets sandbox CA") -> CertFiles:
    """A self-signed CA in `folder` (`ca.pem`, `ca.key`), made unless both are there."""
    folder = Path(folder)
    ca = CertFiles(folder / "ca.pem", folder / "ca.key")
    if ca.cert.is_file() and ca.key.is_file():
        return ca
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".ca-") as tmp:
        work = Path(tmp)
        _openssl("req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", "ca.key", "-out", "ca.pem", "-days", str(DAYS), "-subj", f"/CN={name}",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                 cwd=work)
        _publish(work, folder, ["ca.key", "ca.pem"])
    return ca


def make_cert(folder: Path, name: str, ca: CertFiles, *, common_name: str, hosts: tuple[str, ...] | list[str] = ()) -> CertFiles:
    """`<name>.pem` and `<name>.key` in `folder`, signed by `ca`, for `common_name` (a client's
    principal is `CN=<common_name>`), with `hosts` (names or IP addresses) as subjectAltName;
    usable as server and client certificate. Made unless both files are there."""
    folder = Path(folder)
    out = CertFiles(folder / f"{name}.pem", folder / f"{name}.key")
    if out.cert.is_file() and out.key.is_file():
        return out
    folder.mkdir(parents=True, exist_ok=True)
    sans = ",".join(f"IP:{h}" if _is_ip(h) else f"DNS:{h}" for h in dict.fromkeys(hosts))
    ext = ("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
           "extendedKeyUsage=serverAuth,clientAuth\n" + (f"subjectAltName={sans}\n" if sans else ""))
    with tempfile.TemporaryDirectory(dir=folder, prefix=f".{name}-") as tmp:
        work = Path(tmp)
        (work / "ext.cnf").write_text(ext)
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={common_name}", cwd=work)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", str(ca.cert), "-CAkey", str(ca.key),
                 "-set_serial", str(int.from_bytes(secrets.token_bytes(8), "big")), "-days", str(DAYS),
                 "-extfile", "ext.cnf", "-out", f"{name}.pem", cwd=work)
        _publish(work, folder, [f"{name}.key", f"{name}.pem"])
    return out


def make_pkcs12(folder: Path, name: str, cert: CertFiles, ca: CertFiles) -> tuple[Path, Path]:
    """`<name>.p12` (the key, the certificate and the CA) and `<name>.password` (its password, made
    here) in `folder`, for a Java key store; made unless both are there."""
    folder = Path(folder)
    store, password = folder / f"{name}.p12", folder / f"{name}.password"
    if store.is_file() and password.is_file():
        return store, password
    with tempfile.TemporaryDirectory(dir=folder, prefix=f".{name}-") as tmp:
        work = Path(tmp)
        (work / f"{name}.password").write_text(secrets.token_urlsafe(24))
        _openssl("pkcs12", "-export", "-in", str(cert.cert), "-inkey", str(cert.key), "-certfile", str(ca.cert),
                 "-name", name, "-out", f"{name}.p12", "-passout", f"file:{name}.password", cwd=work)
        _publish(work, folder, [f"{name}.p12", f"{name}.password"])
    return store, password


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False
