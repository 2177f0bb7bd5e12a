"""No password from a URL reaches any output: planted in every URL a run takes, grepped for in all it leaves.

The planted URLs: a ``--cuzk-results-db`` DSN whose server refuses (SQLAlchemy's error and
frames), a ``--cuzk-status`` URL that answers nothing (the figures' ``na_reasons``), and a
manifest URL that answers 404 (the DID NOT RUN reason).
"""

from __future__ import annotations

import sys

import pytest
import tomli_w
from httpserver import FileServer
from support import PROVE_SOURCE

from pytest_cuzk.refengine.gendata import generate
from pytest_cuzk.wire.redact import MASK, redact

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

PLANTED = "Pl4nted-s3cret"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://cuzk:pw@db.example:5432/runs", f"postgresql://cuzk:{MASK}@db.example:5432/runs"),
        ("see 'https://u:p@h/x.json?token=t&n=1'.", f"see 'https://u:{MASK}@h/x.json?token={MASK}&n=1'."),
        ("http://h/status?api_key=k&sig=s", f"http://h/status?api_key={MASK}&sig={MASK}"),
        ("http://127.0.0.1:9820/status", "http://127.0.0.1:9820/status"),
        (
            "postgresql://cuzk@db/runs and sqlite:////tmp/r.db",
            "postgresql://cuzk@db/runs and sqlite:////tmp/r.db",
        ),
    ],
)
def test_redact_masks_passwords_and_secret_parameters_only(url, shown):
    assert redact(url) == shown


@pytest.mark.e2e  # a subprocess pytest run on real daemons: the end-to-end tier
def test_a_planted_password_reaches_no_output(inner, pytester):
    pytest.importorskip("psycopg", reason="the postgresql:// DSN needs the psycopg driver to be tried")
    data = pytester.path / "data"
    generate(data, preset="default", seed=0)
    with FileServer() as server:
        manifest = tomllib.loads((data / "manifest.toml").read_text())
        remote = server.url(f"/wpost.json?token={PLANTED}").replace("http://", f"http://cuzk:{PLANTED}@")
        manifest["kinds"]["wpost"] = [{"file": "wpost-remote.json", "url": remote}]
        (data / "manifest.toml").write_text(tomli_w.dumps(manifest))
        outputs = [pytester.path / name for name in ("junit.xml", "report.html", "bench.json")]
        result = inner(
            {"test_prove": PROVE_SOURCE},
            "-k",
            "winning or wpost",
            "--cuzk-batch-sizes=1",
            "--import-mode=importlib",
            f"--cuzk-manifest={data / 'manifest.toml'}",
            f"--cuzk-results-db=postgresql://cuzk:{PLANTED}@127.0.0.1:1/runs",
            f"--cuzk-status=http://cuzk:{PLANTED}@127.0.0.1:1/status?token={PLANTED}",
            f"--junitxml={outputs[0]}",
            f"--cuzk-html={outputs[1]}",
            f"--benchmark-json={outputs[2]}",
            "-rA",
        )
    text = result.stdout.str() + result.stderr.str()
    assert "cannot record in the results database postgresql://cuzk:***@127.0.0.1:1/runs" in text
    assert f"http://cuzk:{MASK}@127.0.0.1:{server.url('').split(':')[-1]}/wpost.json?token={MASK}" in text
    left = [p for p in pytester.path.rglob("*") if p.is_file() and p.parent != data]
    assert set(outputs) <= set(left), "every output was written"
    leaks = [str(p) for p in left if PLANTED.encode() in p.read_bytes()]
    assert PLANTED not in text and leaks == []
