"""What the plugin's own tests share: reference daemons, local HTTP and PostgreSQL servers, a browser.

Imported by package name (``from helpers.support import QUICK_PLAN``): ``tests/`` is on ``sys.path``
by pytest's rootdir rule (it holds ``conftest.py`` and no ``__init__.py``), so no test module's
name can shadow a helper.
"""
