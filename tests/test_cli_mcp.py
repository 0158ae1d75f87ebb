"""``fathom mcp`` through the SDK's own stdio client: the tools and their schemas, answers that
cite the right page, chunks as resources, ingest under --root only, a collection another
process updates, concurrent calls, and bad input answered with clear errors while the server
keeps serving."""

from __future__ import annotations

import base64
import json
import logging
import os
from pathlib import Path

import pytest
from fathom.bench.support import docgen
from fathom.core.config import load_config
from fathom.index.ingest import ingest_paths
from fathom.tests.support.mcp_support import error, mcp_session, result, run

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
QUESTION = "Which exit code does Fathom use when the command line itself is wrong?"
PUMP = "The Zorblax coolant pump impeller is cast from titanium.\n"


@pytest.fixture
def docs(tmp_path: Path, minilm) -> Path:
    """The user guide ingested as collection ``guide`` in this test's FATHOM_HOME."""
    folder = tmp_path / "docs"
    folder.mkdir()
    docgen.make_user_guide_pdf(folder / "guide.pdf")
    ingest_paths(load_config(), [folder], "guide", embedder=minilm)
    return folder


def test_tools_schemas_answers_and_resources(docs: Path, tmp_path: Path) -> None:
    async def body():
        async with mcp_session("--generator", "extractive", log=tmp_path / "err.log") as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert set(tools) == {"search", "retrieve", "ask", "show", "list_collections"}
            for tool in tools.values():
                assert len(tool.description) > 100 and tool.input_schema["type"] == "object"
            search_args = tools["search"].input_schema["properties"]
            assert search_args["k"]["maximum"] == 50
            assert {"query", "collection", "k", "mode", "doc"} == set(search_args)
            assert tools["search"].input_schema["required"] == ["query"]
            assert tools["ask"].input_schema["required"] == ["question"]

            found = result(await s.call_tool("search", {"query": "exit code command line", "k": 3}))
            assert found["collection"] == "guide" and len(found["hits"]) == 3
            top = found["hits"][0]
            assert top["pages"] == "3" and top["section"] == "Exit codes"
            assert top["uri"] == f"fathom://guide/{top['chunk_id']}"
            assert top["path"] == str(docs / "guide.pdf") and "untrusted" in found["note"]

            ctx = result(await s.call_tool("retrieve", {"question": QUESTION}))
            assert ctx["k"] >= 1 and ctx["why"] and ctx["policy"]
            assert ctx["sources"][0]["pages"] == "3" and '<source n="1">' in ctx["context"]
            assert 0 < ctx["context_tokens"] <= ctx["budget"]["tokens"]
            assert "untrusted" in ctx["instructions"]

            answer = result(await s.call_tool("ask", {"question": QUESTION}))
            assert "2 when the command line itself is wrong" in answer["answer"]
            assert answer["citations"][0]["pages"] == "3"
            assert answer["trace"]["backend"] == "extractive"
            jsonschema = pytest.importorskip("jsonschema")
            schema = json.loads((REPO / "docs" / "answer.schema.json").read_text())
            jsonschema.validate(answer, schema)

            templates = (await s.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == [
                "fathom://{collection}/{chunk_id}",
                "fathom://{collection}/{chunk_id}/page.png",
            ]
            read = await s.read_resource(top["uri"])
            chunk = json.loads(read.contents[0].text)
            assert chunk["pages"] == "3" and "2 when the command line" in chunk["text"]

            # show: the page as image content after its description; the same PNG as a resource
            assert tools["show"].input_schema["required"] == ["chunk_id"]
            shown = await s.call_tool("show", {"chunk_id": top["chunk_id"]})
            described = result(shown)
            assert described["shown"][0]["page"] == 3 and described["pages"] == "3"
            text, image = shown.content
            assert json.loads(text.text) == described
            assert image.type == "image" and image.mime_type == "image/png"
            png = base64.b64decode(image.data)
            assert png.startswith(b"\x89PNG")
            page = await s.read_resource(f"{top['uri']}/page.png")
            assert page.contents[0].mime_type == "image/png"
            assert base64.b64decode(page.contents[0].blob) == png
            missing = error(await s.call_tool("show", {"chunk_id": "feedfacefeedface"}))
            assert "no chunk 'feedfacefeedface' in collection 'guide'" in missing

            listed = result(await s.call_tool("list_collections", {}))
            assert listed["collections"][0]["name"] == "guide" and listed["ingest"] is False
            assert listed["collections"][0]["chunks"] > 5

    run(body)
    # Logs went to stderr; the history records the ask as `fathom ask` does.
    assert "fathom mcp:" in (tmp_path / "err.log").read_text()
    from fathom.stages.history import History

    recent = History(load_config().home_path() / "history.db").recent(5)
    assert [r["question"] for r in recent] == [QUESTION]


def test_ingest_only_under_a_root(docs: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    docgen.make_text(outside / "secret.txt", "The vault code is 4417.\n")
    docgen.make_text(docs / "pump.txt", PUMP)

    async def body():
        async with mcp_session("--root", str(docs), log=tmp_path / "err.log") as s:
            names = {t.name for t in (await s.list_tools()).tools}
            assert "ingest" in names
            refused = error(
                await s.call_tool(
                    "ingest", {"paths": [str(outside / "secret.txt")], "collection": "guide"}
                )
            )
            assert "outside the folders this server may read" in refused
            assert str(docs) in refused
            done = result(
                await s.call_tool("ingest", {"paths": ["pump.txt"], "collection": "guide"})
            )
            assert done["committed"] and done["counts"]["ok"] == 1
            hits = result(await s.call_tool("search", {"query": "Zorblax impeller", "k": 2}))
            assert "Zorblax" in hits["hits"][0]["text"]
            vault = result(await s.call_tool("search", {"query": "vault code", "k": 5}))
            assert all("4417" not in h["text"] for h in vault["hits"])

    run(body)


def test_a_collection_another_process_updates_is_seen_by_the_next_search(
    docs: Path, tmp_path: Path, minilm
) -> None:
    async def body():
        async with mcp_session(log=tmp_path / "err.log") as s:
            before = result(await s.call_tool("search", {"query": "Zorblax impeller", "k": 3}))
            assert all("Zorblax" not in h["text"] for h in before["hits"])
            # This test's process is another process than the server: it ingests on its own.
            docgen.make_text(docs / "pump.txt", PUMP)
            ingest_paths(load_config(), [docs], "guide", embedder=minilm)
            after = result(await s.call_tool("search", {"query": "Zorblax impeller", "k": 3}))
            assert "Zorblax" in after["hits"][0]["text"]
            assert after["hits"][0]["path"] == str(docs / "pump.txt")
            (docs / "pump.txt").unlink()
            ingest_paths(load_config(), [docs], "guide", embedder=minilm)
            gone = result(await s.call_tool("search", {"query": "Zorblax impeller", "k": 3}))
            assert all("Zorblax" not in h["text"] for h in gone["hits"])

    run(body)


def test_ten_concurrent_searches_all_succeed(docs: Path, tmp_path: Path) -> None:
    import anyio

    queries = [
        "exit codes",
        "encrypted PDF password",
        "where collections are stored",
        "supported formats",
        "JSON output",
        "configuration file",
        "scanned PDF without text",
        "hybrid search",
        "installation with pip",
        "two-column layouts",
    ]

    async def body():
        async with mcp_session(log=tmp_path / "err.log") as s:
            alone = {}
            for q in queries:
                alone[q] = result(await s.call_tool("search", {"query": q, "k": 4}))
            together: dict[str, dict] = {}

            async def one(q: str) -> None:
                together[q] = result(await s.call_tool("search", {"query": q, "k": 4}))

            async with anyio.create_task_group() as tg:
                for q in queries:
                    tg.start_soon(one, q)
            assert set(together) == set(queries)
            for q in queries:
                assert [h["chunk_id"] for h in together[q]["hits"]] == [
                    h["chunk_id"] for h in alone[q]["hits"]
                ]

    run(body)


# ---------------------------------------------------------------------------------------------
# Bad input: a clear error each time, and the server keeps serving
# ---------------------------------------------------------------------------------------------


async def _still_serving(s) -> None:
    found = result(await s.call_tool("search", {"query": "exit codes", "k": 1}))
    assert found["hits"][0]["pages"] == "3"


def test_malformed_arguments(docs: Path, tmp_path: Path) -> None:
    async def body():
        async with mcp_session(log=tmp_path / "err.log") as s:
            missing = error(await s.call_tool("search", {"k": 3}))
            assert missing == "search: query: field required — see the tool's input schema"
            typed = error(await s.call_tool("search", {"query": "x", "k": "many"}))
            assert typed.startswith("search: k: input should be a valid integer")
            assert "many" not in typed  # the arguments are not echoed back
            mode = error(await s.call_tool("search", {"query": "x", "mode": "fuzzy"}))
            assert mode.startswith("search: mode: input should be 'hybrid', 'dense' or 'bm25'")
            listed = error(await s.call_tool("ingest", {"paths": ["a.pdf"]}))
            assert "ingest" in listed  # no --root: no such tool
            empty = error(await s.call_tool("ask", {"question": "   "}))
            assert empty.startswith("the question is empty")
            await _still_serving(s)

    run(body)


def test_unknown_collection(docs: Path, tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError

    async def body():
        async with mcp_session(log=tmp_path / "err.log") as s:
            msg = error(await s.call_tool("search", {"query": "x", "collection": "nope"}))
            assert msg == "no collection named 'nope' — served: guide (see list_collections)"
            bad = error(await s.call_tool("retrieve", {"question": "x", "collection": "../x"}))
            assert "collection name '../x'" in bad
            with pytest.raises(MCPError, match="no collection named 'nope'"):
                await s.read_resource("fathom://nope/0123456789abcdef")
            with pytest.raises(MCPError, match="no chunk"):
                await s.read_resource("fathom://guide/0123456789abcdef")
            await _still_serving(s)

    run(body)


def test_a_served_subset_hides_the_other_collections(docs: Path, tmp_path: Path, minilm) -> None:
    ingest_paths(load_config(), [docs], "other", embedder=minilm)

    async def body():
        async with mcp_session("--collection", "other", log=tmp_path / "err.log") as s:
            listed = result(await s.call_tool("list_collections", {}))
            assert [c["name"] for c in listed["collections"]] == ["other"]
            msg = error(await s.call_tool("search", {"query": "x", "collection": "guide"}))
            assert msg.startswith("collection 'guide' is not served here")
            found = result(await s.call_tool("search", {"query": "exit codes", "k": 1}))
            assert found["collection"] == "other"

    run(body)


def test_huge_k(docs: Path, tmp_path: Path) -> None:
    async def body():
        async with mcp_session(log=tmp_path / "err.log") as s:
            msg = error(await s.call_tool("search", {"query": "exit codes", "k": 10**9}))
            assert msg == "k = 1000000000: give between 1 and 50 hits"
            zero = error(await s.call_tool("search", {"query": "exit codes", "k": 0}))
            assert zero.startswith("search: k: input should be greater than or equal to 1")
            huge = error(await s.call_tool("search", {"query": "word " * 5000}))
            assert "keep it under 10,000" in huge
            await _still_serving(s)

    run(body)


def test_a_path_with_dotdot(docs: Path, tmp_path: Path) -> None:
    docgen.make_text(tmp_path / "outside.txt", "Outside the root.\n")

    async def body():
        async with mcp_session("--root", str(docs), log=tmp_path / "err.log") as s:
            for path in ["../outside.txt", f"{docs}/../outside.txt", "sub/../../outside.txt"]:
                msg = error(await s.call_tool("ingest", {"paths": [path], "collection": "guide"}))
                assert msg.startswith(f"{path}: '..' is not allowed in a path")
            await _still_serving(s)

    run(body)


def test_a_symlink_out_of_a_root(docs: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    docgen.make_text(outside / "secret.txt", "The vault code is 4417.\n")
    os.symlink(outside / "secret.txt", docs / "link.txt")
    os.symlink(outside, docs / "linked-folder")
    nested = docs / "notes"
    nested.mkdir()
    docgen.make_text(nested / "pump.txt", PUMP)
    os.symlink(outside / "secret.txt", nested / "inner-link.txt")

    async def body():
        async with mcp_session("--root", str(docs), log=tmp_path / "err.log") as s:
            for path in ["link.txt", str(docs / "linked-folder"), "linked-folder/secret.txt"]:
                msg = error(await s.call_tool("ingest", {"paths": [path], "collection": "guide"}))
                assert msg.startswith(f"{path}: leads through a symlink to {outside}")
            # A folder inside the root: its symlinks are not followed.
            done = result(await s.call_tool("ingest", {"paths": ["notes"], "collection": "guide"}))
            assert done["counts"]["ok"] == 1 and done["counts"]["skipped"] == 1
            vault = result(await s.call_tool("search", {"query": "vault code 4417", "k": 10}))
            assert all("4417" not in h["text"] for h in vault["hits"])
            await _still_serving(s)

    run(body)


def test_no_secret_in_any_output_or_log(docs: Path, tmp_path: Path) -> None:
    key = "sk-fathom-test-0123456789abcdef"
    env = {
        "OPENAI_API_KEY": key,
        "FATHOM_GENERATOR__API_KEY": key,
        "FATHOM_GENERATOR__BASE_URL": "http://127.0.0.1:9/v1",  # nothing listens there
        "FATHOM_GENERATOR__RETRIES": "0",
        "FATHOM_GENERATOR__TIMEOUT_S": "2",
    }
    log = tmp_path / "err.log"

    async def body():
        async with mcp_session("--generator", "openai", log=log, env=env) as s:
            texts = []
            found = result(await s.call_tool("search", {"query": f"what is {key}?", "k": 2}))
            assert found["query"] == "what is ***?"
            texts.append(json.dumps(found))
            failed = await s.call_tool("ask", {"question": f"Is {key} a key?"})
            assert failed.is_error
            texts.append(failed.content[0].text)
            ctx = await s.call_tool("retrieve", {"question": f"Is {key} a key?"})
            texts.append(ctx.content[0].text)
            assert all(key not in t for t in texts)

    run(body)
    assert key not in log.read_text()


def test_nothing_but_the_protocol_reaches_stdout(
    docs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A print anywhere in the server (here a stray one in list_collections, patched in at
    start-up) goes to stderr, during the session and when the process exits."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import sys\n"
        "from fathom.mcp_server.tools import FathomTools\n"
        "listed = FathomTools.list_collections\n"
        "def noisy(self):\n"
        "    print('stray output from a tool; stdout is stderr:', sys.stdout is sys.stderr)\n"
        "    return listed(self)\n"
        "FathomTools.list_collections = noisy\n"
    )
    env = {"PYTHONPATH": os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")])}
    log = tmp_path / "err.log"

    async def body():
        async with mcp_session(log=log, env=env) as s:
            for _ in range(3):
                listed = result(await s.call_tool("list_collections", {}))
                assert listed["collections"][0]["name"] == "guide"
            await _still_serving(s)

    with caplog.at_level(logging.WARNING):
        run(body)
    # Python's own stdout is stderr while serving: nothing is left in a stdout buffer for the
    # protocol's file descriptor once the SDK gives it back at exit.
    assert log.read_text().count("stray output from a tool; stdout is stderr: True") == 3
    assert not [r for r in caplog.records if "parse" in r.getMessage().lower()]
