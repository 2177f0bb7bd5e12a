"""Test data: the manifest, the data store (download, verify, pin) and the requests built from it.

It imports ``core``, ``config``, ``vocab`` and ``proto``.
"""
