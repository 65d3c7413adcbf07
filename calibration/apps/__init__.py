"""Real Modal apps for calibration runs, written against modal 1.6.4's API.

- ``loadtest``: the reference load test's Function, its four ways past the limits (docs/sources.md §1).
- ``coldstart``: a container-start probe, lazy loading vs memory snapshot restore (docs/sources.md §3).
- ``sandboxes``: a sandbox-creation probe (docs/sources.md §2).

Each module builds its app with ``make_app(name, ...)`` so one run deploys under its own name (``calibration.run``
does; app copies are the same function under several names). The functions are module-level and decorated inside
``make_app``: modal 1.6.4 supports "functions defined in global scope but decorated elsewhere"
(modal/_runtime/user_code_imports.py, ``import_single_function_service`` and ``import_server_service``: the
container imports the module, takes the raw function or class by name, and finds the app by name or makes one).

These modules import only the standard library and ``modal`` at the top (the container runs them too); a
container's extra packages are imported where they are used.
"""

from __future__ import annotations

import modal

PYTHON = "3.11"


def image(*packages: str, index_url: str | None = None, env: dict[str, str] | None = None) -> modal.Image:
    """The containers' image: Debian slim, ``packages``, ``env`` (``Image.env``), and this package's Python source
    (only ``.py`` files: ``Image.add_local_python_source``'s default ``ignore``, so traces under calibration/data
    are never uploaded; the apps pass ``include_source=False`` because the automatic entrypoint mount takes every
    file of the top-level package, modal/_utils/function_utils.py ``get_entrypoint_mount``)."""
    img = modal.Image.debian_slim(python_version=PYTHON)
    if packages:
        img = img.pip_install(*packages, index_url=index_url)
    if env:
        img = img.env(env)  # before the local source: modal allows no build step after an ``add_local_*``
    return img.add_local_python_source("calibration")
