"""Portfolio ``select`` mode: each chosen member answers from its own results, then the
generator picks or merges the answers.

One answer per member from its own top k (at once when the generator is a server), then the
generator reads the union of their sources, renumbered so the candidates' citations stay valid,
and gives the best-supported answer. Without a language model (the extractive answerer) the
candidate with the highest support confidence wins. Under a deadline the members and the
selection share the time left in equal windows, and a member whose answer was cut is named.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from fathom.core.base import Hit
from fathom.core.citations import parse_citations, renumber_citations
from fathom.stages.deadline import DEADLINE_NOTICES
from fathom.stages.records import Trace, elapsed_ms
from fathom.stages.rerank import rerank_behind
from fathom.stages.rounds import generate_round

if TYPE_CHECKING:
    from fathom.stages.parts import Parts
    from fathom.stages.records import Prepared

# A member's answer: (member name, sources used, draft, confidence).
Candidate = tuple[str, list[Hit], Any, Any]


@dataclass
class PortfolioSelect:
    """Select mode over an Engine's ``parts``; each member's results are reranked to its top
    ``rerank_candidates`` first."""

    parts: Parts
    rerank_candidates: int

    def answer(
        self,
        prepared: Prepared,
        k: int,
        budget: int,
        trace: Trace,
        on_token: Callable[[str], Any] | None,
        use_rerank: bool,
        answered: dict[tuple[str, int], Any],
    ) -> tuple[list[Hit], Any, Any]:
        """``(sources, draft, confidence)`` at depth ``k``. ``answered`` carries member answers
        across feedback rounds of one answer, so a member with no deeper results is not asked
        the same prompt again."""
        names = list(prepared.portfolio.members) if prepared.portfolio else []
        # A language model selects among two or more answers; else the best-supported stands.
        selects = self.parts.generator.language_model and len(names) > 1
        candidates, subs = self._members(
            prepared, names, k, budget, trace, use_rerank, answered, selects
        )
        self._merge_member_traces(names, subs, trace, selects)
        if not selects:
            best = max(range(len(candidates)), key=lambda i: candidates[i][3].score)
            name, used, draft, conf = candidates[best]
            trace.tokens["context"] = subs[best].tokens["context"]
            trace.notice(
                f"portfolio select: kept the answer from {name} (highest support "
                f"confidence, {conf.score:.2f}, of {len(candidates)} members)",
                "portfolio select:",
            )
            if on_token is not None:
                on_token(draft.text)
            return used, draft, conf
        return self._selection(prepared.question, candidates, k, budget, trace, on_token)

    def _members(
        self,
        prepared: Prepared,
        names: list[str],
        k: int,
        budget: int,
        trace: Trace,
        use_rerank: bool,
        answered: dict[tuple[str, int], Any],
        selects: bool,
    ) -> tuple[list[Candidate], list[Trace]]:
        """Each member's answer from its own top ``k``, each with its own trace; with
        ``selects``, the deadline keeps a share for the model's choice among them."""
        question = prepared.question

        def member_answer(name: str, sub: Trace, until: float | None) -> Candidate:
            return self._member(prepared, name, k, budget, sub, until, use_rerank, answered)

        subs = [Trace(question=question, collection=trace.collection) for _ in names]
        # The members' own traces start at zero, so each gets its window as a time.
        clock = self.parts.clock
        windows = clock.windows(clock.until(trace), len(names), len(names) + selects)
        if self.parts.generator.concurrent_requests and len(names) > 1:
            # A server answers the members' requests concurrently; a stage costs the slowest
            # member's time (they overlap).
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(len(names), thread_name_prefix="fathom-select") as ex:
                candidates = list(ex.map(member_answer, names, subs, windows))
            for stage in {st for sub in subs for st in sub.stages_ms}:
                trace.add_ms(stage, max(sub.stages_ms.get(stage, 0.0) for sub in subs))
        else:
            candidates = [
                member_answer(n, sub, w) for n, sub, w in zip(names, subs, windows, strict=True)
            ]
            for sub in subs:
                for stage, ms in sub.stages_ms.items():
                    trace.add_ms(stage, ms)
        return candidates, subs

    def _member(
        self,
        prepared: Prepared,
        name: str,
        k: int,
        budget: int,
        sub: Trace,
        until: float | None,
        use_rerank: bool,
        answered: dict[tuple[str, int], Any],
    ) -> Candidate:
        """Member ``name``'s answer from its own top ``k`` (reranked once per question), on
        its own trace ``sub``, held to ``until`` when given."""
        pf = prepared.portfolio
        assert pf is not None
        question, hits = prepared.question, list(pf.hits[name])
        # A member with fewer hits than a deeper round asks for gives the same prompt
        # again: its answer from the last round stands (and costs nothing more).
        depth = min(k, len(hits))
        done = answered.get((name, depth))
        if done is not None:
            return name, *done
        if use_rerank and len(hits) > 1:
            memo = prepared.memo.get(f"rerank:{name}")
            if memo is None:
                t = time.perf_counter()
                reranker = self.parts.reranker()
                ranked = rerank_behind(reranker, question, hits, self.rerank_candidates)
                memo = (ranked, elapsed_ms(t))
                prepared.memo[f"rerank:{name}"] = memo
                sub.add_ms("rerank", memo[1])  # charged once, not again per round
            hits = list(memo[0])
        used, draft, conf = generate_round(
            self.parts, question, hits, k, budget, sub, deadline=until is not None, until=until
        )
        answered[(name, depth)] = (used, draft, conf)
        return name, used, draft, conf

    def _merge_member_traces(
        self, names: list[str], subs: list[Trace], trace: Trace, selects: bool
    ) -> None:
        """The members' tokens, rounds and notices into the answer's trace (stage times are
        merged as they ran: in turn, or overlapping)."""
        for sub in subs:
            for key, n_tokens in sub.tokens.items():
                if key != "context":
                    trace.tokens[key] += n_tokens
            trace.tokens["context"] = max(trace.tokens["context"], sub.tokens["context"])
            trace.rounds.extend(sub.rounds)
        for name, sub in zip(names, subs, strict=True):
            for note in sub.notices:
                kind = next((k for k in DEADLINE_NOTICES if note.startswith(k)), None)
                if kind is None:
                    trace.note(note)
                elif selects:  # about one member's answer, not the final one
                    trace.notice(f"member {name}: {note}", f"member {name}: {kind}")
                else:
                    trace.notice(note, kind)

    def _selection(
        self,
        question: str,
        candidates: list[Candidate],
        k: int,
        budget: int,
        trace: Trace,
        on_token: Callable[[str], Any] | None,
    ) -> tuple[list[Hit], Any, Any]:
        """The generator's pick or merge of the candidates, over the union of their sources."""
        union: list[Hit] = []  # the candidates' sources, in member order, each once
        seen: set[str] = set()
        for _name, used, _draft, _conf in candidates:
            for h in used:
                if h.chunk.chunk_id not in seen:
                    seen.add(h.chunk.chunk_id)
                    union.append(h)
        parts, clock = self.parts, self.parts.clock
        until = clock.until(trace)
        t = time.perf_counter()
        # The selection's prompt holds the candidates as well as the sources: the sources get
        # the budget less what the candidates take of the context window.
        room = parts.budget(selection_prompt(question, candidates, union), budget)
        kept = parts.compressor.fit(question, union, room)
        # What the selection must read before the deadline: the sources and the candidates
        # (measured with the numbering before any cut, which changes only citation numbers).
        kept = clock.readable(selection_prompt(question, candidates, kept), kept, until, trace)
        trace.add_ms("compress", elapsed_ms(t))
        selector = selection_prompt(question, candidates, kept)
        trace.set_context([h.chunk.text for h in kept], parts.context_tokens(kept))
        t = time.perf_counter()
        gen = parts.generator
        timing = clock.time_budget(trace, until)
        draft = gen.generate(selector, kept, on_token=on_token, **timing)
        trace.add_ms("generate", elapsed_ms(t))
        clock.note_cut(draft, trace)
        trace.add_generation(draft)
        draft = replace(draft, citations=parse_citations(draft.text, len(kept)))
        t = time.perf_counter()
        conf = parts.scorer.score(draft, kept, parts.vectors(kept))
        trace.add_ms("feedback", elapsed_ms(t))
        trace.add_round(k, draft, conf, len(kept))
        trace.notice(
            f"portfolio select: {gen.model} chose among the answers of "
            f"{', '.join(c[0] for c in candidates)}",
            "portfolio select:",
        )
        return kept, draft, conf


def selection_prompt(question: str, candidates: list[Candidate], kept: list[Hit]) -> str:
    """The selection's question: the candidates with citations renumbered to ``kept``."""
    renumber = {h.chunk.chunk_id: i for i, h in enumerate(kept, start=1)}
    lines = []
    for i, (_name, used, draft, _conf) in enumerate(candidates):
        mapping = {
            n: renumber[h.chunk.chunk_id]
            for n, h in enumerate(used, start=1)
            if h.chunk.chunk_id in renumber
        }
        text = renumber_citations(draft.text, mapping).strip()
        lines.append(f"({chr(65 + i)}) {text}")
    return (
        f"{question}\n\nCandidate answers, each written from different search results "
        "(their [n] refer to the sources above):\n"
        + "\n".join(lines)
        + "\n\nGive the best-supported answer: pick one candidate, or merge them when "
        "they complement each other. Keep the citations."
    )
