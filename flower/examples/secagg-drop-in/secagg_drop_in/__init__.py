"""Flower's secure-aggregation example on privopt's SecAgg+."""
