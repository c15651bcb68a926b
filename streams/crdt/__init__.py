"""The pure replicated state machine: no I/O, no clock reads, no Kafka.

The same code folds ops in the live node, in replay and in Spark.
"""
