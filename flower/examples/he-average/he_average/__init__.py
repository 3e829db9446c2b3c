"""Encrypted averaging of whole model updates with privopt_flower.he."""
