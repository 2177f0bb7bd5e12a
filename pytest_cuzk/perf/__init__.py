"""``cuzk-perf``: the results database read back, one module per subcommand (``cli`` wires them)."""
