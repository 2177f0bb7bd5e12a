"""``cuzk-ref``: the reference engine daemon, with cuzk-daemon's flags, and ``gen-data``.

``cuzk-ref [-c CONFIG] [-l LISTEN] [--log-level LEVEL]`` serves ``cuzk.v1.ProvingEngine``;
``cuzk-ref gen-data DIR [--preset P] [--seed N] [--sectors N]`` writes test data for all four kinds.
Behaving as cuzk (the default), a first SIGINT stops the workers but not the server (later
ones are ignored), SIGTERM kills it, and on TCP the ready line comes before the bind. In the
protocol behaviour SIGTERM and SIGINT both stop it cleanly (queued jobs cancelled, the
server stopped, exit code 0) and the ready line comes after the bind.
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

from pytest_cuzk.refengine import faults
from pytest_cuzk.refengine.config import ConfigError, RefConfig, load_config
from pytest_cuzk.refengine.errors import RefEngineError
from pytest_cuzk.vocab.addresses import UNIX_PREFIX

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
        help="TOML config (cuzk's format); it must exist. Without it, the defaults "
        "(unlike cuzk-daemon, /data/zk/cuzk.toml is not read)",
    )
    parser.add_argument("-l", "--listen", help="IP:port or unix://<path>; overrides daemon.listen")
    parser.add_argument("--log-level", help="trace, debug, info, warn or error; overrides logging.level")
    sub = parser.add_subparsers(dest="command")
    gen = sub.add_parser("gen-data", help="write deterministic test data for all four kinds and a manifest")
    gen.add_argument("dir", type=Path, help="output directory")
    gen.add_argument("--preset", default="default", help="circuit size preset. Default: %(default)s")
    gen.add_argument("--seed", type=int, default=0, help="data seed. Default: %(default)s")
    gen.add_argument(
        "--sectors", type=int, default=2, help="sectors per kind (at least 1). Default: %(default)s"
    )
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
    """Serve until a signal stops the daemon; returns the exit code."""
    from pytest_cuzk.refengine.engine import Engine
    from pytest_cuzk.refengine.server import bind_target, serve
    from pytest_cuzk.refengine.status_http import start_status_server

    bind_target(config.listen)  # reject a bad address before any work
    if config.faults.active:
        log.warning("fault injection is on: %s", config.faults)
    faults.start_memory_growth(config.faults.grow_memory_mib_per_s)
    engine = Engine.from_config(config)
    engine.start()
    faults.before_ready(config.faults)
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    def on_first_sigint(_signum: int, _frame: object) -> None:
        log.info("received SIGINT, shutting down")
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # later ones do nothing, as with cuzk
        engine.halt()

    if engine.behave.signals_stop_cleanly:
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    else:
        signal.signal(signal.SIGINT, on_first_sigint)  # SIGTERM keeps its default: the process dies
    early = engine.behave.ready_before_bind and not config.listen.startswith(UNIX_PREFIX)
    if early:  # cuzk-daemon logs its ready line before serve() binds
        log.info("listening on TCP %s", config.listen)
        log.info("cuzk-ref ready, serving on %s", config.listen)
    server, address = serve(engine, config.listen)
    if not early:
        log.info("cuzk-ref ready, serving on %s", address)
    status = start_status_server(engine, config.status_listen) if config.status_listen else None
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
        from pytest_cuzk.refengine.gendata import generate

        if args.sectors < 1:
            print(f"Error: --sectors must be at least 1, got {args.sectors}", file=sys.stderr)
            return 1
        generate(args.dir, preset=args.preset, seed=args.seed, sectors=args.sectors)
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
    except (OSError, ValueError, RefEngineError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
