"""``--doc PATTERN``: which documents a pattern selects, retrieval restricted to them (exact
within them, k hits while they have k chunks), and ``ask``, ``search``, ``chat`` and the MCP
tools reading only those documents, on a collection of generated pump manuals that all
answer the same question differently."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from fathom import cli
from fathom.bench.support import docgen
from fathom.core.config import IndexConfig, load_config
from fathom.core.errors import DocumentNotFound, FathomError
from fathom.index.collection import Collection, embed_input
from fathom.index.dense import DenseIndex
from fathom.index.doc_filter import select_documents
from fathom.index.ingest import ingest_paths
from fathom.index.manifest import DocEntry, Manifest
from fathom.index.retrieve import CollectionRetriever
from fathom.index.sparse import Bm25Index

REPO = Path(__file__).resolve().parents[1]
QUESTION = "What is the coolant pump impeller cast from?"

# name, impeller material, pressure (bar), city: each manual answers QUESTION its own way.
PUMPS = [
    ("Zorblax", "titanium", 12, "Oslo"),
    ("Quenta", "bronze", 7, "Lyon"),
    ("Mirrow", "ceramic", 9, "Porto"),
    ("Tessel", "duplex steel", 15, "Tallinn"),
]
SECTIONS = [
    (
        "Impeller",
        "The {n} coolant pump impeller is cast from {m}. Engineers in {c} chose {m} for the "
        "{n} impeller because it resists cavitation and erosion at high flow, and every {n} "
        "impeller is balanced before it leaves the foundry.",
    ),
    (
        "Operating pressure",
        "The {n} pump runs at {p} bar in normal service. Above {p} bar the {n} relief valve "
        "opens and returns coolant to the reservoir; the {n} gauge turns red at that point.",
    ),
    (
        "Installation",
        "Mount the {n} pump on a level concrete plinth with four anchor bolts. The {n} inlet "
        "must face the reservoir and the outlet pipe must rise towards the heat exchanger.",
    ),
    (
        "Maintenance",
        "Replace the {n} shaft seal every two thousand hours. Grease the {n} bearings monthly "
        "with lithium grease and record each service in the {n} logbook kept in {c}.",
    ),
    (
        "Safety",
        "Isolate the {n} motor before opening the casing. Coolant leaving the {n} pump can be "
        "hot enough to scald, so wear gloves and a face shield near the {n} outlet.",
    ),
    (
        "Warranty",
        "The {n} warranty covers the casing and the impeller for five years from delivery. "
        "Claims go to the {n} service office in {c} with the pump's serial number.",
    ),
]


def write_manuals(folder: Path) -> dict[str, Path]:
    """One Markdown manual per pump, one section per topic (so several chunks each)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, material, pressure, city in PUMPS:
        parts = [f"# {name} Pump Manual\n"]
        for heading, body in SECTIONS:
            text = body.format(n=name, m=material, p=pressure, c=city)
            parts.append(f"## {heading}\n\n{text} {text}\n")
        out[name] = docgen.make_text(folder / f"{name.lower()}-manual.md", "\n".join(parts))
    return out


@pytest.fixture
def manuals(cfg, tmp_path: Path, minilm) -> dict[str, Path]:
    """The four manuals ingested as collection ``manuals``."""
    paths = write_manuals(tmp_path / "pumps")  # not ./manuals: `ask manuals` names the collection
    ingest_paths(cfg, [tmp_path / "pumps"], "manuals", embedder=minilm)
    return paths


def _doc_ids(cfg) -> dict[str, str]:
    coll = Collection.open(cfg, "manuals")
    try:
        return {d.title.split()[0]: d.doc_id for d in coll.manifest.documents}
    finally:
        coll.close()


# --- which documents a pattern selects ---------------------------------------------------------


def _manifest(entries: list[DocEntry]) -> Manifest:
    return Manifest(
        name="lib",
        generation=1,
        fathom_version="0",
        embedder_id="hashing:8",
        embedder_dim=8,
        embed_title_prefix=True,
        chunker={},
        dense={},
        bm25={},
        n_chunks=sum(e.chunks for e in entries),
        documents=entries,
        created="",
        updated="",
    )


LIBRARY = _manifest(
    [
        DocEntry("/lib/reports/q3-report.pdf", "ok", doc_id="a1", title="Quarterly Report Q3",
                 chunks=4, rows=(0, 4)),
        DocEntry("/lib/reports/annual.pdf", "ok", doc_id="b2", title="Annual Report 2024",
                 chunks=6, rows=(4, 10)),
        DocEntry("/lib/notes/Meeting.TXT", "ok", doc_id="c3", title="Board meeting notes",
                 chunks=2, rows=(10, 12)),
        DocEntry("/lib/data/docs.jsonl#Super_Bowl_50", "ok", doc_id="d4", title="Super Bowl 50",
                 source_id="Super_Bowl_50", chunks=3, rows=(12, 15)),
        DocEntry("/lib/reports/broken.pdf", "failed", title="Broken Report", error="truncated"),
    ]
)  # fmt: skip


def _titles(patterns: list[str]) -> list[str]:
    selected = select_documents(LIBRARY, patterns)
    assert selected is not None
    return [d.title for d in selected.documents]


def test_a_pattern_selects_by_title_file_name_path_glob_or_part_of_a_title() -> None:
    assert _titles(["quarterly report q3"]) == ["Quarterly Report Q3"]  # the title, any case
    assert _titles(["MEETING.txt"]) == ["Board meeting notes"]  # the file name, any case
    assert _titles(["/lib/reports/annual.pdf"]) == ["Annual Report 2024"]  # the path
    assert _titles(["super_bowl_50"]) == ["Super Bowl 50"]  # a record's source id
    assert _titles(["b2"]) == ["Annual Report 2024"]  # Fathom's doc_id
    assert _titles(["*.pdf"]) == ["Quarterly Report Q3", "Annual Report 2024"]  # file names
    assert _titles(["*/notes/*"]) == ["Board meeting notes"]  # a glob over the path
    assert _titles(["annual*"]) == ["Annual Report 2024"]  # a glob over the file name or title
    assert _titles(["report"]) == ["Quarterly Report Q3", "Annual Report 2024"]  # part of a title
    # A failed document has no chunks to read: no pattern selects it.
    with pytest.raises(DocumentNotFound):
        select_documents(LIBRARY, ["Broken Report"])
    # A glob must match a whole string: "*.pd" is not a suffix of any path.
    with pytest.raises(DocumentNotFound):
        select_documents(LIBRARY, ["*.pd"])


def test_several_patterns_select_their_union_with_its_rows() -> None:
    selected = select_documents(LIBRARY, ["bowl", "q3", " q3 ", "notes"])
    assert selected is not None
    assert selected.patterns == ("bowl", "q3", "notes")  # stripped, each once
    assert [d.title for d in selected.documents] == [
        "Quarterly Report Q3",
        "Board meeting notes",
        "Super Bowl 50",
    ]  # in row order
    assert selected.ranges == ((0, 4), (10, 15))  # adjacent documents' rows merged
    assert selected.rows.tolist() == [0, 1, 2, 3, 10, 11, 12, 13, 14] and len(selected) == 9
    assert selected.to_dict() == {
        "patterns": ["bowl", "q3", "notes"],
        "documents": [
            {"doc_id": "a1", "title": "Quarterly Report Q3", "path": "/lib/reports/q3-report.pdf",
             "chunks": 4},
            {"doc_id": "c3", "title": "Board meeting notes", "path": "/lib/notes/Meeting.TXT",
             "chunks": 2},
            {"doc_id": "d4", "title": "Super Bowl 50", "path": "/lib/data/docs.jsonl#Super_Bowl_50",
             "chunks": 3},
        ],
        "collection_documents": 4,
    }  # fmt: skip
    assert select_documents(LIBRARY, []) is None


def test_a_pattern_that_selects_nothing_names_the_closest_titles() -> None:
    with pytest.raises(DocumentNotFound) as caught:
        select_documents(LIBRARY, ["report", "Anual Reprot 2024"])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("no document matches 'Anual Reprot 2024' in collection 'lib'")
    assert "closest titles: 'Annual Report 2024'," in message  # the closest first
    assert "give a title, a file name, a path glob" in message
    assert isinstance(caught.value, FathomError)  # exit 1, one line, in the CLI
    with pytest.raises(FathomError, match="a document pattern is empty"):
        select_documents(LIBRARY, ["report", "  "])


# --- retrieval within the selected rows --------------------------------------------------------


def _brute_top(scores: np.ndarray, rows: np.ndarray, k: int) -> list[float]:
    return sorted(scores[rows].tolist(), reverse=True)[:k]


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_dense_search_within_ranges_is_exact(kind: str) -> None:
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(600, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    threshold = 10_000 if kind == "flat" else 0
    ann = "hnsw" if kind == "hnsw" else "ivf"
    index = DenseIndex.build(vecs, IndexConfig(hnsw_threshold=threshold, ann=ann))
    assert index.kind == kind
    within = [(40, 70), (300, 310), (590, 600)]
    rows = np.concatenate([np.arange(a, b) for a, b in within])
    for seed in range(5):
        q = rng.normal(size=16).astype(np.float32)
        q /= np.linalg.norm(q)
        want = vecs @ q
        # scan_up_to=0 takes an HNSW or IVF index through itself with an ID selector.
        for scan_up_to in (0, 10_000):
            scores, got = index.search(q, 12, within=within, scan_up_to=scan_up_to)
            assert len(got) == 12 and set(got.tolist()) <= set(rows.tolist()), seed
            if kind == "flat" or scan_up_to:
                np.testing.assert_allclose(scores, _brute_top(want, rows, 12), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(scores, want[got], rtol=1e-5, atol=1e-5)
        # Fewer selected vectors than k: all of them, best first.
        scores, got = index.search(q, 50, within=[(590, 600)])
        assert sorted(got.tolist()) == list(range(590, 600))
        assert list(scores) == sorted(scores, reverse=True)
    # The unrestricted search is unchanged.
    assert len(index.search(vecs[0], 5)[1]) == 5


def test_bm25_search_within_rows_ranks_only_them() -> None:
    texts = [f"pump impeller bronze casing {'seal ' * (i % 5)}" for i in range(40)]
    texts += ["unrelated words entirely"] * 5
    bm25 = Bm25Index.build(texts, IndexConfig())
    everything = bm25.scores("impeller seal")
    rows = np.array([3, 4, 5, 6, 20, 21, 42, 43], dtype=np.int64)
    scores, got = bm25.search("impeller seal", 4, within=rows)
    assert set(got.tolist()) <= set(rows.tolist()) and len(got) == 4
    np.testing.assert_allclose(scores, _brute_top(everything, rows, 4), rtol=1e-6)
    # Rows without a shared term are never returned (scores must be positive), as unfiltered.
    _, got = bm25.search("impeller seal", 10, within=rows)
    assert sorted(got.tolist()) == [3, 4, 5, 6, 20, 21]


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_a_filtered_probe_returns_k_hits_of_the_selected_document(
    cfg, manuals, minilm, mode: str
) -> None:
    coll = Collection.open(cfg, "manuals")
    try:
        retriever = CollectionRetriever(coll, minilm if mode != "bm25" else None, mode=mode)
        ids = _doc_ids(cfg)
        unfiltered = retriever.probe(QUESTION, 10)
        assert len({h.chunk.doc_id for h in unfiltered.hits}) > 1  # the filter has work to do
        within = select_documents(coll.manifest, ["quenta"])
        assert within is not None and len(within) >= 6
        probe = retriever.probe(QUESTION, 6, within=within)
        assert [h.chunk.doc_id for h in probe.hits] == [ids["Quenta"]] * 6
        assert all(h.row in set(within.rows.tolist()) for h in probe.hits)
        if mode == "dense":  # exact within the document: its best chunks by brute force
            chunks = coll.chunks(within.rows.tolist())
            vecs = minilm.embed([embed_input(c, True) for c in chunks])
            want = sorted((vecs @ minilm.embed_query(QUESTION)).tolist(), reverse=True)[:6]
            got = [h.scores["dense"] for h in probe.hits]
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    finally:
        coll.close()


def test_further_hops_search_the_same_documents(cfg, manuals, minilm) -> None:
    from fathom.index.hops import next_hop

    coll = Collection.open(cfg, "manuals")
    try:
        within = select_documents(coll.manifest, ["mirrow", "tessel"])
        hybrid = CollectionRetriever(coll, minilm)
        first = hybrid.probe(QUESTION, 8, within=within)
        sparse = CollectionRetriever(coll, None, mode="bm25")
        deeper, follow = next_hop(sparse, QUESTION, first, 8, 60, within=within)
        assert follow  # the manuals' names are bridges
        ids = _doc_ids(cfg)
        assert {h.chunk.doc_id for h in deeper.hits} <= {ids["Mirrow"], ids["Tessel"]}
    finally:
        coll.close()


# --- ask, search and chat ----------------------------------------------------------------------


def _flat(text: str) -> str:
    """Terminal output with its line wrapping undone."""
    return " ".join(text.split())


def _ask_json(*args: str) -> dict:
    res = CliRunner().invoke(
        cli.main, ["ask", "manuals", QUESTION, "--generator", "extractive", "--json", *args]
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_ask_with_doc_answers_from_that_document_only(cfg, manuals) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "docs" / "answer.schema.json").read_text())
    quenta = str(manuals["Quenta"])
    everything = _ask_json("--k", "8")
    assert len({s["path"] for s in everything["sources"]}) > 1 and "docs" not in everything

    for args in (["--k", "8"], []):  # a fixed depth, and the depth policy's on the filtered probe
        data = _ask_json("--doc", "Quenta Pump Manual", *args)
        jsonschema.validate(data, schema)
        assert data["sources"] and {s["path"] for s in data["sources"]} == {quenta}
        assert {c["path"] for c in data["citations"]} == {quenta}
        assert "bronze" in data["answer"]
        assert data["docs"]["patterns"] == ["Quenta Pump Manual"]
        assert [d["path"] for d in data["docs"]["documents"]] == [quenta]
        assert data["docs"]["collection_documents"] == 4
    data = _ask_json("--doc", "tessel-manual.md", "--k", "4")
    assert {s["path"] for s in data["sources"]} == {str(manuals["Tessel"])}
    assert "duplex steel" in data["answer"]


def test_ask_report_says_how_many_documents_it_read(cfg, manuals) -> None:
    res = CliRunner().invoke(
        cli.main,
        ["ask", "manuals", QUESTION, "--generator", "extractive", "--doc", "*/mirrow-*"],
    )
    assert res.exit_code == 0, res.output
    assert "Documents restricted to 1 of 4 documents: Mirrow Pump Manual" in _flat(res.stdout)
    assert "ceramic" in res.stdout


def test_a_whole_document_summary_reads_only_the_selected_document(cfg, manuals) -> None:
    res = CliRunner().invoke(
        cli.main,
        ["ask", "manuals", "Summarize this document.", "--generator", "extractive", "--json",
         "--doc", "zorblax"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["trace"]["query_type"] == "summarization"
    assert data["sources"] and {s["path"] for s in data["sources"]} == {str(manuals["Zorblax"])}


def test_search_doc_repeated_selects_the_union(cfg, manuals) -> None:
    runner = CliRunner()
    res = runner.invoke(
        cli.main,
        ["search", "manuals", QUESTION, "-k", "12", "--json", "--doc", "quenta", "--doc",
         "MIRROW-MANUAL.MD"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    ids = _doc_ids(cfg)
    assert len(data["hits"]) == 12
    assert {h["doc_id"] for h in data["hits"]} == {ids["Quenta"], ids["Mirrow"]}
    kept = sorted(d["title"] for d in data["docs"]["documents"])
    assert kept == ["Mirrow Pump Manual", "Quenta Pump Manual"]
    assert data["docs"]["patterns"] == ["quenta", "MIRROW-MANUAL.MD"]
    one = json.loads(
        runner.invoke(cli.main, ["search", "manuals", QUESTION, "--json", "--doc", "Quenta"]).stdout
    )
    assert {h["doc_id"] for h in one["hits"]} == {ids["Quenta"]}
    table = runner.invoke(cli.main, ["search", "manuals", QUESTION, "--doc", "Quenta"])
    assert table.exit_code == 0 and "restricted to 1 of 4 documents" in _flat(table.stdout)


def test_an_unmatched_doc_is_one_line_and_exit_1(cfg, manuals) -> None:
    runner = CliRunner()
    for command in (
        ["search", "manuals", QUESTION, "--doc", "Qeunta Pump Manul"],
        ["ask", "manuals", QUESTION, "--generator", "extractive", "--doc", "Qeunta Pump Manul"],
        ["chat", "manuals", "--generator", "extractive", "--doc", "Qeunta Pump Manul"],
    ):
        res = runner.invoke(cli.main, command, input=f"{QUESTION}\n\n")
        assert res.exit_code == 1, (command, res.output)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in res.output
        assert "no document matches 'Qeunta Pump Manul' in collection 'manuals'" in lines[0]
        assert "closest titles: 'Quenta Pump Manual'" in lines[0]


def test_chat_with_doc_keeps_the_filter_for_the_session(cfg, manuals) -> None:
    res = CliRunner().invoke(
        cli.main,
        ["chat", "manuals", "--generator", "extractive", "--doc", "tessel", "--k", "4"],
        input=f"{QUESTION}\nHow many bar does the pump run at?\n\n",
    )
    assert res.exit_code == 0, res.output
    assert "restricted to 1 of 4 documents: Tessel Pump Manual" in _flat(res.stderr)
    out = _flat(res.stdout)
    assert out.count("Documents restricted to 1 of 4 documents") == 2
    assert "duplex steel" in out and "15 bar" in out
    for other in ("Zorblax", "Quenta", "Mirrow"):
        assert f"{other} Pump" not in res.stdout


# --- the MCP tools' doc argument ---------------------------------------------------------------


def test_mcp_tools_take_doc(tmp_path: Path, manuals) -> None:
    from fathom.mcp_server import build_server
    from fathom.mcp_server.tools import FathomTools

    cfg = load_config(overrides={"generator.backend": "extractive"})
    tools = FathomTools(cfg)
    quenta = str(manuals["Quenta"])
    try:
        found = tools.search(QUESTION, k=6, doc=["quenta"])
        assert len(found["hits"]) == 6 and {h["path"] for h in found["hits"]} == {quenta}
        assert found["docs"]["documents"][0]["path"] == quenta
        both = tools.search(QUESTION, k=12, doc=["quenta", "*zorblax*"])
        assert {h["path"] for h in both["hits"]} == {quenta, str(manuals["Zorblax"])}
        assert "docs" not in tools.search(QUESTION, k=3)
        ctx = tools.retrieve(QUESTION, doc=["Quenta Pump Manual"])
        assert ctx["sources"] and {s["path"] for s in ctx["sources"]} == {quenta}
        assert ctx["docs"]["patterns"] == ["Quenta Pump Manual"]
        answer = tools.ask(QUESTION, doc=["quenta"])
        assert {s["path"] for s in answer["sources"]} == {quenta} and "bronze" in answer["answer"]
        with pytest.raises(DocumentNotFound, match="closest titles: 'Quenta Pump Manual'"):
            tools.search(QUESTION, doc=["Qeunta"])
        with pytest.raises(FathomError, match="21 document patterns — give at most 20"):
            tools.ask(QUESTION, doc=["quenta"] * 21)
        with pytest.raises(FathomError, match="a document pattern is empty"):
            tools.retrieve(QUESTION, doc=[""])

        server = build_server(tools)
        listed = {t.name: t for t in asyncio.run(server.list_tools())}
        for name in ("search", "retrieve", "ask"):
            arg = listed[name].input_schema["properties"]["doc"]
            assert {"type": "array", "items": {"type": "string"}} in arg["anyOf"]
            assert "doc" not in listed[name].input_schema.get("required", [])
        res = asyncio.run(server.call_tool("search", {"query": QUESTION, "doc": ["Qeunta"]}))
        assert res.is_error and "closest titles: 'Quenta Pump Manual'" in res.content[0].text
        res = asyncio.run(server.call_tool("search", {"query": QUESTION, "doc": ["quenta"]}))
        assert not res.is_error
        assert {h["path"] for h in res.structured_content["hits"]} == {quenta}
    finally:
        tools.close()
