"""The OpenAPI 3.1 document of the API, one part per capability."""
