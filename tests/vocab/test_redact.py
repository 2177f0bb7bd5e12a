"""What ``redact`` masks: passwords, a userinfo with none (a token), secret-like parameters."""

from __future__ import annotations

import pytest

from pytest_cuzk.vocab.redact import MASK, redact


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://cuzk:pw@db.example:5432/runs", f"postgresql://cuzk:{MASK}@db.example:5432/runs"),
        ("see 'https://u:p@h/x.json?token=t&n=1'.", f"see 'https://u:{MASK}@h/x.json?token={MASK}&n=1'."),
        ("http://h/status?api_key=k&sig=s", f"http://h/status?api_key={MASK}&sig={MASK}"),
        ("http://127.0.0.1:9820/status", "http://127.0.0.1:9820/status"),
        (
            "postgresql://db/runs and sqlite:////tmp/r.db",
            "postgresql://db/runs and sqlite:////tmp/r.db",
        ),
        ("https://ghp_T0ken@host/c1.json", f"https://{MASK}@host/c1.json"),
        ("postgresql://cuzk@db/runs", f"postgresql://{MASK}@db/runs"),
        ("http://T0ken@127.0.0.1:18081", f"http://{MASK}@127.0.0.1:18081"),
        (
            "https://b.s3.amazonaws.com/c1.json?X-Amz-Credential=AKIA&X-Amz-Signature=ab12&X-Amz-Expires=60",
            f"https://b.s3.amazonaws.com/c1.json?X-Amz-Credential={MASK}&X-Amz-Signature={MASK}&X-Amz-Expires=60",
        ),
        (
            "https://h/f?SIG=s&Access_Token=t&Password=p",
            f"https://h/f?SIG={MASK}&Access_Token={MASK}&Password={MASK}",
        ),
        ("https://h/cb#access_token=t&state=1", f"https://h/cb#access_token={MASK}&state=1"),
        ("https://[bad/x//T0ken@h", f"https://[bad/x//{MASK}@h"),
    ],
)
def test_redact_masks_passwords_and_secret_parameters_only(url, shown):
    assert redact(url) == shown
