"""No secret from a URL reaches any output: planted in every URL a run takes, grepped for in all it leaves.

Each secret is planted in three forms: a token as the whole userinfo (``http://TOKEN@host``), a
password (``http://user:PW@host``) and query parameters (``?X-Amz-Signature=...&token=...``).
The planted URLs: a manifest download URL that serves its file (downloaded, pinned on first
use: the ``.pin.json``), one that answers 404 (the DID NOT RUN reason), a ``--cuzk-status`` URL
that answers nothing (the figures' ``na_reasons``), and, each a usage error, a ``--cuzk-results-db``
DSN whose server refuses (SQLAlchemy's error) and each daemon address option. The
outputs searched: the terminal, JUnit XML, the HTML report, the benchmark JSON, the data cache
(pin files, download records) and the daemon's private folder, kept because a test failed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import tomli_w
from helpers.httpserver import FileServer
from helpers.support import PROVE_SOURCE

from pytest_cuzk.refengine.gendata import generate
from pytest_cuzk.vocab.redact import redact

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

PLANTED = "Pl4nted-s3cret"
FORMS = {
    "token-as-user": lambda base, path: base.replace("//", f"//{PLANTED}@") + path,
    "user-password": lambda base, path: base.replace("//", f"//cuzk:{PLANTED}@") + path,
    "query": lambda base, path: (
        f"{base}{path}?X-Amz-Credential={PLANTED}&X-Amz-Signature={PLANTED}&token={PLANTED}"
    ),
}
DSNS = {
    "token-as-user": f"postgresql://{PLANTED}@127.0.0.1:1/runs",
    "user-password": f"postgresql://cuzk:{PLANTED}@127.0.0.1:1/runs",
    "query": f"postgresql://127.0.0.1:1/runs?password={PLANTED}",
}
# A failing test keeps the daemon's private folder (its config and log) as evidence.
FAILING_SOURCE = "def test_fails(cuzk_client):\n    assert False\n"


def _leaks(root: Path, skip: Path) -> list[str]:
    """Files under ``root`` (but not under ``skip``: the manifest, which holds the secret) that hold it."""
    files = [p for p in root.rglob("*") if p.is_file() and skip not in p.parents]
    return [str(p) for p in files if PLANTED.encode() in p.read_bytes()]


@pytest.mark.e2e  # a subprocess pytest run on real daemons: the end-to-end tier
@pytest.mark.parametrize("form", FORMS)
def test_a_planted_secret_reaches_no_output(inner, pytester, monkeypatch, form):
    url = FORMS[form]
    data, cache, tmp = pytester.path / "data", pytester.path / "cache", pytester.path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))  # where the daemon's private folder is made, and kept
    generate(data, preset="default", seed=0)
    with FileServer() as server:
        manifest = tomllib.loads((data / "manifest.toml").read_text())
        winning = manifest["kinds"]["winning"][0]
        served = url(server.base_url, "/winning.json")
        path = "/winning.json" + served.partition("/winning.json")[2]  # the query, when it has one
        server.add(path, (data / winning["file"]).read_bytes())
        del winning["sha256"]  # trusted on first use: pinned, with its URL, beside the cached copy
        manifest["kinds"]["winning"] = [{**winning, "file": "winning-remote.json", "url": served}]
        manifest["kinds"]["wpost"] = [
            {"file": "wpost-remote.json", "url": url(server.base_url, "/gone.json")}
        ]
        (data / "manifest.toml").write_text(tomli_w.dumps(manifest))
        outputs = [pytester.path / name for name in ("junit.xml", "report.html", "bench.json")]
        result = inner(
            {"test_prove": PROVE_SOURCE, "test_failing": FAILING_SOURCE},
            "-k",
            "winning or wpost or fails",
            "--cuzk-batch-sizes=1",
            "--import-mode=importlib",
            f"--cuzk-data-dir={cache}",
            f"--cuzk-manifest={data / 'manifest.toml'}",
            f"--cuzk-status={url('http://127.0.0.1:1', '/status')}",
            f"--junitxml={outputs[0]}",
            f"--cuzk-html={outputs[1]}",
            f"--benchmark-json={outputs[2]}",
            "-rA",
        )
        fetched = server.count(path)
    text = result.stdout.str() + result.stderr.str()
    assert fetched == 1, text
    gone = redact(url(server.base_url, "/gone.json"))
    assert gone in text, "the URL is shown, masked"
    assert all(p.is_file() for p in outputs), "every output was written"
    assert redact(served) in (cache / "winning-remote.json.pin.json").read_text()
    assert list(tmp.glob("cuzk-*/*/*")), "the daemon's folder was kept, with its config and log"
    assert PLANTED not in text
    assert _leaks(pytester.path, skip=data) == []


@pytest.mark.e2e  # subprocess pytest runs
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("option", ["--cuzk-daemon", "--cuzk-addr", "--cuzk-ab", "--cuzk-results-db"])
def test_a_secret_in_an_address_is_masked_in_its_usage_error(inner, option, form):
    address = FORMS[form]("http://127.0.0.1:1", "/")
    if option == "--cuzk-results-db":
        pytest.importorskip("psycopg", reason="the postgresql:// DSN needs the psycopg driver to be tried")
        args: tuple[str, ...] = ("--cuzk-daemon=auto", f"{option}={DSNS[form]}")
    elif option == "--cuzk-addr":
        args = ("--cuzk-daemon=auto", f"--cuzk-addr={address}")
    else:
        args = (f"{option}={address}",)
    result = inner({"test_prove": PROVE_SOURCE}, *args)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert PLANTED not in text and "***" in text, text
