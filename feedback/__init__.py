"""Confidence estimation and the escalation loop (deeper retrieval when an answer is weak)."""
