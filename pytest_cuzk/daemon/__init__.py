"""Talking to a daemon over gRPC: the client, its error mapping, the proof check, the status poller.

gRPC errors become the plugin's in one place (``errormap``). It imports ``core``, ``vocab``
and ``proto`` only.
"""
