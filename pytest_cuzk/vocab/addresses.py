"""Daemon addresses as cuzk's tools write them: one grammar for clients, one for ``--listen``.

Clients (the plugin, Curio's Go client, cuzk-bench) accept ``IP:port``, ``host:port``,
``[IPv6]:port``, ``http://host:port`` and ``unix:///path``; cuzk-daemon's ``--listen``
takes only ``unix://<path>`` or a literal ``IP:port`` (hostnames are rejected). Both are
parsed here and nowhere else.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from pytest_cuzk.vocab.redact import redact

__all__ = [
    "ACCEPTED_FORMS",
    "UNIX_PREFIX",
    "Address",
    "ListenTarget",
    "is_local",
    "label_from_address",
    "parse_address",
    "parse_listen",
    "shown_address",
]

UNIX_PREFIX = "unix://"
ACCEPTED_FORMS = (
    "IP:port, host:port, [IPv6]:port, http://host:port, unix:///absolute/path (or unix:/absolute/path)"
)


@dataclass(frozen=True)
class Address:
    """A dialable daemon address: the gRPC target and the form shown to people."""

    target: str
    display: str

    @property
    def is_unix(self) -> bool:
        return self.target.startswith("unix:")

    @property
    def socket_path(self) -> Path | None:
        """The unix socket's path, None for TCP."""
        return Path(self.target.removeprefix("unix:")) if self.is_unix else None

    @property
    def host(self) -> str:
        """The host part of a TCP address (brackets removed); empty for unix sockets."""
        return "" if self.is_unix else self.target.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int | None:
        return None if self.is_unix else int(self.target.rpartition(":")[2])

    @property
    def is_local(self) -> bool:
        """A unix socket or a loopback address: the daemon runs on this machine."""
        if self.is_unix or self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_address(addr: str) -> Address:
    """Parse a client-side daemon address; ValueError lists the accepted forms, and masks a password."""
    text = addr.strip()
    try:
        if text.startswith("unix:"):
            return _parse_unix(text)
        if "://" in text:
            scheme, _, rest = text.partition("://")
            if scheme != "http":
                raise ValueError(f"scheme {scheme}:// is not supported (cuzk speaks plaintext gRPC)")
            text = rest.removesuffix("/")
        if "@" in text.partition("/")[0]:
            raise ValueError("a daemon address takes no user name or password (cuzk's gRPC has no login)")
        if any(ch in text for ch in "/?#"):  # said before a part of it is quoted: a query may hold a token
            raise ValueError("a daemon address takes no path, query or fragment")
        return _parse_host_port(text)
    except ValueError as exc:
        raise ValueError(
            f"cannot use daemon address {shown_address(addr)!r}: {exc}. Accepted forms: {ACCEPTED_FORMS}"
        ) from None


def shown_address(addr: str) -> str:
    """``addr`` as a message shows it: a password masked, with or without ``http://`` before it."""
    text = addr.strip()
    return redact(text) if "://" in text else redact(f"http://{text}").removeprefix("http://")


def _parse_unix(text: str) -> Address:
    path = text.removeprefix(UNIX_PREFIX) if text.startswith(UNIX_PREFIX) else text.removeprefix("unix:")
    if not path.startswith("/"):
        raise ValueError("the unix socket path must be absolute")
    return Address(f"unix:{path}", f"{UNIX_PREFIX}{path}")


def _parse_host_port(text: str) -> Address:
    if not text:
        raise ValueError("the address is empty")
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError("the port is missing")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if ":" in host and bare == host:
        raise ValueError("put an IPv6 address in brackets, e.g. [::1]:9820")
    if bare != host and not _is_ipv6(bare):
        raise ValueError(f"{bare!r} in brackets is not an IPv6 address")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"port {port!r} is not a number from 1 to 65535")
    if not bare or any(ch in bare for ch in "/ @"):
        raise ValueError(f"host {host!r} is not a host name or IP address")
    target = f"{host}:{int(port)}"
    return Address(target, target)


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def is_local(address: str) -> bool:
    """Whether an address in any client form is on this machine; False for one that does not parse."""
    try:
        return parse_address(address).is_local
    except ValueError:
        return False


def label_from_address(address: str) -> str:
    """A short host label from an address: ``10.0.0.5:9820`` -> ``10.0.0.5-9820``."""
    text = parse_address(address).display.split("://", 1)[-1].strip("/")
    return text.replace("[", "").replace("]", "").replace(":", "-").replace("/", "_")


@dataclass(frozen=True)
class ListenTarget:
    """Where a daemon binds: a gRPC bind target, and the socket path for ``unix://``."""

    target: str
    socket_path: Path | None


def parse_listen(listen: str) -> ListenTarget:
    """cuzk-daemon's ``--listen`` rules: ``unix://<path>`` or a literal ``IP:port``, nothing else.

    ValueError says "invalid listen address", as cuzk-daemon does for a hostname.
    """
    if listen.startswith(UNIX_PREFIX):
        path = Path(listen[len(UNIX_PREFIX) :])
        if not path.name:
            raise ValueError(f"invalid listen address {listen!r}: no socket path after unix://")
        return ListenTarget(f"unix:{path}", path)
    host, sep, port = listen.rpartition(":")
    try:
        ip = ipaddress.ip_address(host[1:-1] if host.startswith("[") and host.endswith("]") else host)
        if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(listen)
        if (ip.version == 6) != host.startswith("["):
            raise ValueError(listen)
    except ValueError:
        raise ValueError(
            f"invalid listen address {listen!r}: use a literal IP:port (e.g. 127.0.0.1:9820) or unix://<path>"
        ) from None
    return ListenTarget(f"{host}:{port}", None)
