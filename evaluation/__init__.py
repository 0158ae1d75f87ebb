"""Batch evaluation: strategies side by side over a document set (``fathom eval``)."""
