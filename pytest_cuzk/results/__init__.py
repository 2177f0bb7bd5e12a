"""The results database: its rows (runs, tests, hosts) and SQLite or PostgreSQL behind it.

SQLAlchemy Core. It imports only ``host`` (a host's identity); the plugin writes to it through
``sinks.recording`` and ``cuzk-perf`` reads it back.
"""
