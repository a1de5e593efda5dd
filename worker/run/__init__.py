"""Running jobs: the runner, the monitor, the relay."""
