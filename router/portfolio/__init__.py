"""Retriever portfolios at ask time: the pool of retriever configurations (``pool.py``), a
built portfolio's file (``file.py``), the router that picks members per question (``router.py``)
and running the chosen members together (``runtime.py``). Building one is ``learn``'s."""
