"""A Modal Function's input plane (docs/sources.md §1), model ``"function"``: the load test's scenario, run and
descriptor (``loadtest``) with its parts, summaries, records and shortcuts here; the callers (``callers/``), what Modal
runs for the Function (``platform/``), what every run is checked against (``checks/``), and the call styles
(``approaches/``)."""
