"""The region node: Kafka writer, materializer loop, command executor, blocking waiters."""
