"""The Kafka runtime: the same handlers as a faust-streaming worker on a real broker (docs/kafka.md)."""
