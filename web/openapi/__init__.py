"""The OpenAPI 3.1 document of the API, one part per capability."""

from web.openapi.document import served

__all__ = ["served"]
