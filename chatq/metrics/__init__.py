"""What the processes measure and report: shared series, the queue's figures."""
