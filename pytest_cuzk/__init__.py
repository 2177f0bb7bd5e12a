"""pytest-cuzk: validate and benchmark cuzk proving daemons from pytest."""

__version__ = "0.1.0"
