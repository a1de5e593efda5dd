"""How a process runs: logs, offloading, tallies, heartbeats."""
