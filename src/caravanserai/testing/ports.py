"""Free TCP ports for tests: the one home of "a port nothing listens on" (the plugin's etcd, the suite, its support
package and the benchmarks all take theirs from here).

    address = f"127.0.0.1:{free_port()}"
    api, metrics = free_ports(2)

Guarantees:

* **Nothing listens there** when the call returns: the kernel picked the port for a socket that is closed again.
  Another process may take it before the caller binds it, so bind soon after.
* **Distinct**: the ports of one `free_ports` call differ (every socket is held until all are picked).
* **Loopback by default**; `host` may be any local address, IPv6 ones (`::1`) included.
"""

from __future__ import annotations

import socket


def free_ports(count: int, *, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct TCP ports on `host` that nothing listens on right now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets = [socket.socket(family, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_port(*, host: str = "127.0.0.1") -> int:
    """One TCP port on `host` that nothing listens on right now."""
    return free_ports(1, host=host)[0]


__all__ = ["free_port", "free_ports"]
