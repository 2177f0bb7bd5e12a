"""An attached daemon on another host: nothing of it can be sampled here, and it says so."""

from __future__ import annotations

from pytest_cuzk.backends.attached import AttachedDaemon


def test_a_remote_daemon_is_not_sampled_and_says_so(tmp_path):
    daemon = AttachedDaemon("far", "10.0.0.5:9820", start_timeout_s=1.0, param_cache=None, data_dir=tmp_path)
    assert (daemon.pid, daemon.unsampled()) == (None, "remote daemon")
