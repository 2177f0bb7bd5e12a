"""pytest-cuzk: pytest hooks, options and fixtures (being assembled)."""
