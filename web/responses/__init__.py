"""OpenAI's Responses API endpoints, and their Server-Sent Events."""
