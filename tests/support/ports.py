"""Free loopback ports for servers a test starts (the sandbox's own picker, one home)."""

from __future__ import annotations

from blueprint.sandbox.kafka_broker import _free_ports


def free_ports(n: int) -> list[int]:
    """`n` distinct TCP ports on 127.0.0.1 that nothing listened on a moment ago (bound to port 0
    together, then released: another process may still take one before the test does)."""
    return _free_ports(n)


def free_port() -> int:
    """One port of :func:`free_ports`."""
    return free_ports(1)[0]
