"""Sandbox creation at scale (domain.md §2): the burst and its client (``creation``), the worker fleet (``fleet``),
placement rules (``placement``) and the control planes (``planes``)."""
