"""The Celery app and its broker (Redis via kombu, or RabbitMQ): lanes, backlog."""
