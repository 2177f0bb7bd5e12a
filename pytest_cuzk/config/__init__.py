"""What the user asked for: every ``--cuzk-*`` option declared once, and the settings.

Settings are resolved from options, ini keys, environment and config files and checked at
configure time. It imports ``vocab``, ``host`` (cache folders), ``core`` and ``results`` (a
database URL's grammar).
"""
