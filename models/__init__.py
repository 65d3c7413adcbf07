"""The simulated systems: a Function's input plane (``inputs``), sandbox creation (``sandboxes``) and container start
(``coldstart``), each described to the rest of the project by one ``Model`` (``registry``)."""

import sim  # noqa: F401  (first: its SCALESIM_PURE import hook, before a compiled module of the model is imported)
