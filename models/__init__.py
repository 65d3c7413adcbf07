"""The simulated systems: a Function's input plane (``inputs``), sandbox creation (``sandboxes``) and container start
(``coldstart``), each described to the rest of the project by one ``Model`` (``registry``)."""
