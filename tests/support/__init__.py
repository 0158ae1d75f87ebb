"""Helpers the tests share: generated documents, fault-injecting servers, fake backends."""
