"""The web's spans: each /v1 request, a long-poll's wake."""
