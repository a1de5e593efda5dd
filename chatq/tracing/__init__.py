"""W3C trace context, carried with every job; OpenTelemetry's SDK when an OTLP endpoint is set."""
