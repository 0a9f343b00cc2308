"""The two runtimes, ``embedded`` (the default, no servers) and ``kafka``, and what both share:
transient-error classification, the vector guard, projection snapshots, rebuild's common steps."""
