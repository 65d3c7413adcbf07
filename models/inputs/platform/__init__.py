"""What Modal runs for a Function: its input plane and limits, the start limit, containers and the autoscaler, the
workspace, per-call overhead, the limit monitor, prices and faults."""
