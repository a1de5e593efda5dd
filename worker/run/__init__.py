"""Running jobs: the runner, the running set, flushes, the monitor, the relay."""
