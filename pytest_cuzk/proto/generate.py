"""Regenerate (or check) the committed Python stubs for ``cuzk/v1/proving.proto``.

Run ``python -m pytest_cuzk.proto.generate`` after editing the .proto, or with
``--check`` to exit non-zero when the committed stubs differ from what the .proto
generates (the test suite does this). Needs the ``dev`` extra (grpcio-tools).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
PROTO_FILE = "cuzk/v1/proving.proto"
STUBS = ("proving_pb2.py", "proving_pb2.pyi", "proving_pb2_grpc.py")
_ABSOLUTE_IMPORT = "from cuzk.v1 import proving_pb2 as"
_RELATIVE_IMPORT = "from . import proving_pb2 as"


def render() -> dict[str, str]:
    """Run protoc on the .proto and return the stub files' text by name."""
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as out:
        rc = protoc.main(
            [
                "protoc",
                f"-I{PROTO_ROOT}",
                f"--python_out={out}",
                f"--pyi_out={out}",
                f"--grpc_python_out={out}",
                str(PROTO_ROOT / PROTO_FILE),
            ]
        )
        if rc != 0:
            raise RuntimeError(f"protoc failed on {PROTO_ROOT / PROTO_FILE} (exit {rc})")
        gen = Path(out) / "cuzk" / "v1"
        # The grpc stub imports its messages absolutely; the package holds them relatively.
        return {name: (gen / name).read_text().replace(_ABSOLUTE_IMPORT, _RELATIVE_IMPORT) for name in STUBS}


def stale_stubs() -> list[str]:
    """Names of committed stubs that differ from freshly generated ones."""
    target = PROTO_ROOT / "cuzk" / "v1"
    return [
        name
        for name, text in render().items()
        if not (target / name).exists() or (target / name).read_text() != text
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="Only report stale stubs; exit 1 if any")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_stubs()
        for name in stale:
            print(f"stale: {PROTO_ROOT / 'cuzk' / 'v1' / name} (run python -m pytest_cuzk.proto.generate)")
        return 1 if stale else 0
    target = PROTO_ROOT / "cuzk" / "v1"
    for name, text in render().items():
        (target / name).write_text(text)
        print(f"wrote {target / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
