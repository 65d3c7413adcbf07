"""The callers of a load test: closed-loop clients, open-loop arrivals and replayed traces, how their calls leave them
(.map, retries, timeouts) and the demand they follow."""
