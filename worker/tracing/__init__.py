"""The worker's spans: a job's time queued, its claim, runs, upstream attempts, webhooks."""
