"""A daemon's configuration in its build's name: keys flattened and masked, a digest, what differs."""

from __future__ import annotations

from pytest_cuzk.vocab.daemonconfig import binary_of, config_changes, config_record, differing

BASE = {
    "daemon": {"listen": "127.0.0.1:9820", "status_listen": ""},
    "srs": {"param_cache": "/data/zk/params"},
    "scheduler": {"max_batch_size": 2, "max_batch_wait_ms": 300},
    "ref": {"faults": {"slow_factor": 1.25}},
    "upload": {"url": "https://user:hunter2@example.com/x?token=abc", "auth_token": "s3cret"},
}


def test_the_record_keeps_what_the_user_set_and_masks_secrets():
    keys = config_record(BASE).keys
    assert keys == {
        "ref.faults.slow_factor": "1.25",
        "scheduler.max_batch_wait_ms": "300",
        "upload.auth_token": "***",
        "upload.url": "https://user:***@example.com/x?token=***",
    }, "listen, status_listen, param_cache and the batch size are the plugin's to set each start"
    assert "hunter2" not in str(keys) and "s3cret" not in str(keys)


def test_the_digest_names_the_config_and_changes_with_any_key():
    a, b = config_record(BASE), config_record({**BASE, "ref": {"faults": {"slow_factor": 1.0}}})
    assert a.tag == f"config={a.digest}" and len(a.digest) == 8 and a.digest != b.digest
    moved = {**BASE, "daemon": {"listen": "unix:///other.sock"}, "scheduler": {"max_batch_wait_ms": 300}}
    assert config_record(moved).digest == a.digest, "what the plugin sets per start is no other build"
    assert config_record({}).tag == "config=default"


def test_two_configs_of_one_binary_say_which_keys_differ():
    a, b = (
        config_record(BASE),
        config_record({"ref": {"faults": {"slow_factor": 1.5}}, "logging": {"level": "x"}}),
    )
    assert differing(a.keys, b.keys) == [
        "logging.level: unset -> x",
        "ref.faults.slow_factor: 1.25 -> 1.5",
        "scheduler.max_batch_wait_ms: 300 -> unset",
        "upload.auth_token: *** -> unset",
        "upload.url: https://user:***@example.com/x?token=*** -> unset",
    ]
    build = "cuzk-daemon sha256:0123456789abcdef"
    before, after = {f"{build} {a.tag}": a.keys}, {f"{build} {b.tag}": b.keys}
    assert config_changes(before, after) == differing(a.keys, b.keys)
    assert binary_of(f"{build} {a.tag}") == build and binary_of(build) == build
    other = {f"cuzk-daemon sha256:fedcba9876543210 {b.tag}": b.keys}
    assert config_changes(before, other) == [], "another binary is another build: no key diff to show"
