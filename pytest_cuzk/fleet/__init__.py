"""The fleet, read back (``cuzk-perf``): hosts, history and offers from the results database.

One module per subcommand; ``cli`` wires them.
"""
