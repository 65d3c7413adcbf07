"""Sandbox creation at scale (docs/sources.md §2): the burst and its client (``creation``), the worker fleet
(``fleet``), placement rules (``placement``) and the control planes (``planes``)."""
