"""``cuzk-perf export``: every stored test, flat, for spreadsheets and notebooks."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import sys
from pathlib import Path
from typing import Any

from pytest_cuzk.results.database import ResultsDB
from pytest_cuzk.results.rows import ResultRow
from pytest_cuzk.vocab.units import plural

__all__ = ["cmd_export", "flat"]


def flat(row: ResultRow) -> dict[str, Any]:
    """One test as a flat record: test fields, then run_* and host_* fields."""
    run = dataclasses.asdict(row.run)
    host = run.pop("host")
    out = dataclasses.asdict(row.test)
    out.update({f"run_{k}": v for k, v in run.items() if k != "run_id"})
    out.update({f"host_{k}": v for k, v in host.items()})
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in out.items()}


def cmd_export(db: ResultsDB, args: argparse.Namespace) -> int:
    """Every stored test, flat, for spreadsheets and notebooks."""
    rows = [flat(r) for r in db.rows(kind=args.kind, build=args.build, host=args.host)]
    buf = io.StringIO()
    if args.format == "json":
        json.dump(rows, buf, indent=2)
        buf.write("\n")
    elif rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
        writer.writeheader()
        for r in rows:
            writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()})
    if args.output:
        Path(args.output).write_text(buf.getvalue())
        print(f"wrote {plural(len(rows), 'test')} to {args.output}")
    else:
        sys.stdout.write(buf.getvalue())
    return 0
