"""The steps of answering one question, and the Engine that runs them in order: rerank,
compress, generate (one module per backend), whole-document summaries, portfolio select mode,
the answer deadline, the report records and the ask history."""
