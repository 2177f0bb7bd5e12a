"""The validation suite: every kind × batch size × concurrency proved, checked and measured.

``pytest --cuzk-daemon=auto`` (a cuzk mode given, no test paths) runs it from anywhere;
``pytest --pyargs pytest_cuzk.suite`` too. ``manifest.toml`` beside it is the default test
data for a real cuzk daemon.
"""
