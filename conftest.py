"""Repository-level pytest configuration: the plugin's own tests use pytester."""

pytest_plugins = ["pytester"]
