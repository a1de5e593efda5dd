"""What the processes measure and report: shared series, GC pauses, the queue's figures."""
