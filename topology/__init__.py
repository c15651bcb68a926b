"""Topology: the regions, their clusters, the mirrors between them, and the local launcher."""
