"""The webhook endpoints of a key, and which endpoints hear of a job."""

from web.webhooks.recipients import record_fields
from web.webhooks.routes import bp

__all__ = ["bp", "record_fields"]
