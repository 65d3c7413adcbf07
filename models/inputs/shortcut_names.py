"""The input plane's shortcuts by name: what the code that takes one checks a run's shortcuts with (``FIFO in
sim.shortcuts``), so that a misspelt name fails to import instead of silently meaning "off". What each shortcut is
exact for is declared in models/inputs/shortcuts.py, which sits above the approaches its shapes ask about; these
names sit below everything that takes a shortcut.
"""

FIFO = "fifo"
IDLE_DECISIONS = "idle_decisions"
ROUND_TRIPS = "round_trips"
BACKS = "backs"
PARTS = "parts"
