"""The on-disk index: manifest, dense vectors (FAISS), BM25, embedders, the chunk store, the
collection with its views, and retrieval over it (dense, BM25, hybrid fusion, multi-hop)."""
