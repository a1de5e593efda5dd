"""How a process runs: gevent's patch, logs, GC pauses, offloading, heartbeats."""
