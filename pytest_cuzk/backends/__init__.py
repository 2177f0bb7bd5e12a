"""Ways of getting a daemon under test, each one class behind the ``DaemonBackend`` Protocol.

``attached`` (someone else's daemon), ``spawned`` (a cuzk binary), ``reference`` (the
reference engine, the plugin's only door into ``refengine``), ``fake`` (an in-process
stand-in for the plugin's own tests); ``choice`` picks among them for ``--cuzk-daemon``.
"""
