"""What fits a model, above the runtime it trains and never imported by it: question sets,
budget sweeps, the depth-policy, query-type and extractive-scorer trainers, and the portfolio
builder. The runtime loads only what they write (arrays and JSON)."""
