"""Which process on this machine serves a daemon address: the pid to sample for an attached daemon.

A unix socket answers ``SO_PEERCRED``: the kernel names the process that listens on it, for any
user and without a scan of ``/proc``. A TCP port's owner is the process holding its listening
socket: psutil maps the kernel's socket table to pids, but only for processes this user may
inspect, so a daemon of another user is found by its socket and still not named (and says so).
"""

from __future__ import annotations

import socket
import struct

import psutil

from pytest_cuzk.vocab.addresses import Address

__all__ = ["socket_owner"]

_CREDS = struct.Struct("3i")  # struct ucred: pid, uid, gid


def socket_owner(address: Address) -> tuple[int | None, str]:
    """The pid listening at a local ``address``, or None and why it cannot be had."""
    if address.socket_path is not None:
        return _unix_owner(str(address.socket_path))
    assert address.port is not None, "a TCP address has a port"
    return _tcp_owner(address.port)


def _unix_owner(path: str) -> tuple[int | None, str]:
    if not hasattr(socket, "SO_PEERCRED"):
        return None, "this platform does not name a unix socket's owner (SO_PEERCRED)"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2.0)
            sock.connect(path)
            pid, _, _ = _CREDS.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDS.size))
    except OSError as exc:
        return None, f"cannot ask {path} for its owner: {exc.strerror or exc}"
    if pid <= 0:
        return None, "the daemon runs in another pid namespace (a container?): its process is not visible"
    return pid, ""


def _tcp_owner(port: int) -> tuple[int | None, str]:
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.Error as exc:
        return None, f"cannot list this machine's sockets: {exc}"
    listening = [c for c in conns if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port]
    if not listening:
        return None, f"no process of this machine listens on port {port} (a forwarded port or a container?)"
    pids = {c.pid for c in listening if c.pid}
    if len(pids) == 1:
        return pids.pop(), ""
    if not pids:
        return None, f"the process listening on port {port} belongs to another user"
    return None, f"several processes listen on port {port}: {', '.join(map(str, sorted(pids)))}"
