"""Fathom: local-first document question answering that decides, per question, how deep to
retrieve.

The package is the repository's root folder: ``fathom.ingestion``, ``fathom.chunking``,
``fathom.index``, ``fathom.router``, ``fathom.feedback``, ``fathom.stages``,
``fathom.evaluation`` and ``fathom.cli``. Importing it loads nothing else.
"""

__version__ = "0.1.0"
