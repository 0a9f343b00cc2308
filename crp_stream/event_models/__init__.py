"""The event models behind ``crp_stream.events`` (import from there: it is the public entry point)."""
