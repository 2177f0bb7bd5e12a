"""``cuzk-ref``: the reference engine daemon, with cuzk-daemon's flags, and ``gen-data``.

``cuzk-ref [-c CONFIG] [-l LISTEN] [--log-level LEVEL]`` serves ``cuzk.v1.ProvingEngine``;
``cuzk-ref gen-data DIR [--preset P] [--seed N]`` writes test data for all four kinds.
Unlike cuzk-daemon, SIGTERM and SIGINT both stop the daemon cleanly (queued jobs are
cancelled, the server stops, exit code 0), and the ready line is printed only after the
listen address is bound.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from . import faults
from .config import DEFAULT_CONFIG_PATH, ConfigError, RefConfig, load_config

__all__ = ["main", "run_daemon"]

log = logging.getLogger("cuzk_ref")
_LEVELS = {
    "trace": logging.DEBUG,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
_STOP_GRACE_S = 1.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cuzk-ref", description="Reference cuzk.v1 proving engine.")
    parser.add_argument(
        "-c",
        "--config",
        type=Path,
        default=DEFAULT_CONFIG_PATH,
        help="TOML config (cuzk's format); a missing file means defaults. Default: %(default)s",
    )
    parser.add_argument("-l", "--listen", help="IP:port or unix://<path>; overrides daemon.listen")
    parser.add_argument("--log-level", help="trace, debug, info, warn or error; overrides logging.level")
    sub = parser.add_subparsers(dest="command")
    gen = sub.add_parser("gen-data", help="write deterministic test data for all four kinds and a manifest")
    gen.add_argument("dir", type=Path, help="output directory")
    gen.add_argument("--preset", default="default", help="circuit size preset. Default: %(default)s")
    gen.add_argument("--seed", type=int, default=0, help="data seed. Default: %(default)s")
    return parser


def _setup_logging(level: str) -> None:
    """Log to stdout like cuzk-daemon; RUST_LOG wins over the flag and the config, as with cuzk."""
    spec = os.environ.get("RUST_LOG") or level
    name = spec.split(",")[0].split("=")[-1].strip().lower()
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)5s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(_LEVELS.get(name, logging.INFO))
    if name not in _LEVELS:
        log.warning("unknown log level %r; using info", spec)


def run_daemon(config: RefConfig) -> int:
    """Serve until SIGTERM or SIGINT; returns the exit code."""
    from .engine import Engine
    from .server import bind_target, serve
    from .status_http import start_status_server

    bind_target(config.listen)  # reject a bad address before any work
    if config.faults.active:
        log.warning("fault injection is on: %s", config.faults)
    faults.start_memory_growth(config.faults.grow_memory_mib_per_s)
    engine = Engine.from_config(config)
    engine.start()
    faults.before_ready(config.faults)
    server, address = serve(engine, config.listen)
    status = start_status_server(engine, config.status_listen) if config.status_listen else None
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info("cuzk-ref ready, serving on %s", address)
    while not stop.wait(0.5):
        pass
    log.info("received %s, shutting down", received[0])
    t0 = time.monotonic()
    engine.shutdown()
    server.stop(_STOP_GRACE_S).wait(_STOP_GRACE_S + 1)
    if status is not None:
        status.stop()
    log.info("stopped in %.2f s", time.monotonic() - t0)
    return 0


def _exit_now(code: int) -> NoReturn:
    """Exit without joining the prover's MSM threads: nobody will receive the proof they work on."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cuzk-ref`` console script."""
    args = _parser().parse_args(argv)
    if args.command == "gen-data":
        from .gendata import generate

        generate(args.dir, preset=args.preset, seed=args.seed)
        print(f"wrote test data and manifest.toml to {args.dir}")
        return 0
    try:
        config = load_config(args.config).with_overrides(listen=args.listen, log_level=args.log_level)
    except ConfigError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    _setup_logging(config.log_level)
    log.info("config: %s", config.source)
    try:
        _exit_now(run_daemon(config))
    except (OSError, ValueError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
