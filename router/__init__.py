"""Query routing: the query-type classifier, per-type retrieval strategies, depth policies."""
