"""The ground every layer stands on: configuration, errors, the records and protocols that flow
between stages, text, word and citation rules. It imports nothing else of Fathom."""
