"""Sandbox creation at scale (docs/sources.md §2): the burst's scenario (``scenario``), its benchmark client
(``client``), one run and the descriptor (``creation``), what a run reports (``summary``), the worker fleet
(``fleet``), placement rules (``placement``) and the control planes (``planes``)."""
