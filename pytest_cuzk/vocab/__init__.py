"""The shared vocabulary: what the plugin and the reference engine both speak.

The proof kinds, the address grammar of cuzk's tools, the vanilla-proof file formats,
units and the few file helpers both sides need. It imports nothing of the plugin or of
the reference engine, so either can use it without pulling in the other
(``tests/test_layering.py`` holds the rule).
"""
