// Fathom's page: plain JavaScript over the server's /api/v1. Every string from a document or a
// model reaches the page as a text node (el() below, textContent): never as HTML.
"use strict";

const CSRF = document.querySelector('meta[name="fathom-csrf"]').content;
const state = { session: newSession(), viewer: null, collections: [] };

function newSession() {
  const bytes = new Uint8Array(9);
  crypto.getRandomValues(bytes);
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// el("p", {class: "x"}, "text", child): an element; strings become text nodes.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const $ = (id) => document.getElementById(id);
const collection = () => $("collection").value;
const fmt = (x, digits = 0) =>
  x === null || x === undefined ? "–" : Number(x).toLocaleString(undefined, { maximumFractionDigits: digits });

async function api(path, options = {}) {
  const headers = { "X-Fathom-CSRF": CSRF, ...(options.headers || {}) };
  if (options.json !== undefined) {
    headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(options.json);
  }
  const response = await fetch(path, { ...options, headers });
  if (!response.ok) {
    let message = response.statusText;
    try { message = (await response.json()).error || message; } catch (_) { /* not JSON */ }
    throw new Error(message);
  }
  return response;
}

// The server-sent events of a streamed response: {event, data} objects, data parsed.
async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data) yield { event, data: JSON.parse(data) };
    }
  }
}

// ---- views -------------------------------------------------------------------------------

for (const tab of document.querySelectorAll(".tab")) {
  tab.addEventListener("click", () => showView(tab.dataset.view));
}

function showView(id) {
  for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== id;
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.view === id);
  if (id === "library-view") loadLibrary();
  if (id === "history-view") loadHistory();
  if (id === "evals-view") loadEvals();
}

// ---- asking ------------------------------------------------------------------------------

$("ask-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const question = $("question").value.trim();
  if (question) ask(question);
});

$("new-conversation").addEventListener("click", () => {
  state.session = newSession();
  $("conversation").replaceChildren(el("p", { class: "hint" }, "A new conversation: the next question starts afresh."));
});

async function ask(question) {
  const turn = el("article", { class: "turn" });
  const text = el("p", { class: "answer streaming" });
  const status = el("p", { class: "status" }, "reading…");
  turn.append(el("h3", { class: "question" }, question), status, text);
  $("conversation").append(turn);
  $("question").value = "";
  $("ask-button").disabled = true;
  const body = { collection: collection(), question, session: state.session, stream: true };
  try {
    const response = await api("/api/v1/ask", { method: "POST", json: body });
    for await (const { event, data } of events(response)) {
      if (event === "followup" && data.method !== "unchanged") {
        turn.insertBefore(el("p", { class: "followup" }, "asked as: ", el("q", {}, data.question)), status);
      } else if (event === "decision") {
        status.textContent = `k = ${data.k} · ${data.query_type}`;
      } else if (event === "escalate") {
        text.append(document.createTextNode("\n"));
        status.textContent = `low confidence: reading deeper (k = ${data.k})`;
      } else if (event === "token") {
        text.append(document.createTextNode(data.text));
      } else if (event === "answer") {
        status.remove();
        showAnswer(turn, text, data);
      } else if (event === "error") {
        throw new Error(data.error);
      }
    }
  } catch (err) {
    status.textContent = "";
    status.append(el("span", { class: "error" }, err.message));
  } finally {
    $("ask-button").disabled = false;
    turn.scrollIntoView({ block: "end" });
  }
}

function showAnswer(turn, textNode, answer) {
  const text = el("p", { class: "answer" + (answer.abstained ? " abstained" : "") });
  // "[n]" markers become links to source n; the rest stays text
  for (const part of answer.answer.split(/(\[\d+\])/)) {
    const m = /^\[(\d+)\]$/.exec(part);
    const source = m && answer.sources[Number(m[1]) - 1];
    if (source) {
      text.append(el("a", { href: "#", class: "cite", onclick: (e) => { e.preventDefault(); openSource(answer.collection, source); } }, part));
    } else {
      text.append(document.createTextNode(part));
    }
  }
  textNode.replaceWith(text);
  const cited = new Set(answer.citations.map((c) => c.n));
  const list = el("ol", { class: "sources" });
  for (const s of answer.sources) {
    list.append(el("li", { value: s.n, class: cited.has(s.n) ? "cited" : "" },
      el("a", { href: "#", onclick: (e) => { e.preventDefault(); openSource(answer.collection, s); } },
        `[${s.n}] ${s.title || s.path}`),
      ` · p. ${s.pages || "–"}`, s.section ? ` · ${s.section}` : ""));
  }
  turn.append(el("details", { class: "sources-box" }, el("summary", {}, `${answer.sources.length} sources read, ${cited.size} cited`), list));
  turn.append(report(answer));
}

function report(answer) {
  const tr = answer.trace;
  const d = tr.decision || {};
  const stages = Object.entries(tr.stages_ms || {});
  const total = tr.total_ms || 1;
  const bars = el("table", { class: "stages" }, stages.map(([name, ms]) =>
    el("tr", {}, el("td", {}, name), el("td", { class: "num" }, fmt(ms, 1)),
      el("td", {}, el("span", { class: "bar", dataset: { w: Math.max(1, Math.round(100 * ms / total)) } })))));
  for (const bar of bars.querySelectorAll(".bar")) bar.style.width = bar.dataset.w + "%";
  const t = tr.tokens || {};
  return el("details", { class: "report", open: true },
    el("summary", {}, `k = ${d.k} (${d.policy}) · ${fmt(tr.total_ms)} ms · confidence ${fmt(answer.confidence.score, 2)}`),
    el("dl", {},
      el("dt", {}, "Depth"), el("dd", {}, `k = ${d.k} by ${d.policy}: `, d.reason || ""),
      el("dt", {}, "Question"), el("dd", {}, `${tr.query_type} · answer kind ${answer.kind || "–"}`),
      el("dt", {}, "Tokens"), el("dd", {}, `prompt ${fmt(t.prompt)} · completion ${fmt(t.completion)} · context ${fmt(t.context)} · embedding ${fmt(t.embedding)}`),
      el("dt", {}, "Cost"), el("dd", {}, `${fmt(tr.cost, 6)} ${tr.currency}`),
      el("dt", {}, "Generator"), el("dd", {}, `${tr.backend} (${tr.model})`),
      el("dt", {}, "Reranker"), el("dd", {}, tr.reranker || "none"),
      tr.notices && tr.notices.length ? [el("dt", {}, "Notices"), el("dd", {}, tr.notices.join(" · "))] : null),
    bars);
}

// ---- the cited page ------------------------------------------------------------------------

function firstPage(pages) {
  const m = /^(\d+)/.exec(pages || "");
  return m ? Number(m[1]) : null;
}

function openSource(name, source) {
  state.viewer = { collection: name, source, page: firstPage(source.pages), pages: null };
  $("viewer").hidden = false;
  $("viewer-title").textContent = `[${source.n}] ${source.title || source.path}`;
  $("passage-text").textContent = source.text;
  loadPage();
}

async function loadPage() {
  const v = state.viewer;
  const image = $("page-image");
  const params = new URLSearchParams({ collection: v.collection, chunk: v.source.chunk_id });
  if (v.page) params.set("page", v.page);
  $("viewer-note").textContent = "";
  try {
    const response = await api("/api/v1/page?" + params);
    v.page = Number(response.headers.get("x-fathom-page"));
    v.pages = Number(response.headers.get("x-fathom-pages")) || null;
    const blob = await response.blob();
    if (image.src) URL.revokeObjectURL(image.src);
    image.src = URL.createObjectURL(blob);
    image.hidden = false;
    image.dataset.located = response.headers.get("x-fathom-located");
    $("viewer-note").textContent = response.headers.get("x-fathom-note") || "";
    $("page-label").textContent = `page ${v.page}` + (v.pages ? ` of ${v.pages}` : "");
  } catch (err) {
    image.hidden = true;
    $("page-label").textContent = "";
    $("viewer-note").textContent = err.message;
    showPassageInContext(v);
  }
  $("page-prev").disabled = !v.page || v.page <= 1;
  $("page-next").disabled = !v.page || (v.pages && v.page >= v.pages);
}

async function showPassageInContext(v) {
  // a document without pages (DOCX, HTML, text): the passage in the text around it
  try {
    const params = new URLSearchParams({ collection: v.collection, chunk: v.source.chunk_id });
    const data = await (await api("/api/v1/show?" + params)).json();
    const item = data.shown[0];
    if (item && item.kind === "text") {
      $("passage-text").replaceChildren(el("span", { class: "context" }, item.before),
        el("mark", {}, item.passage), el("span", { class: "context" }, item.after));
    }
  } catch (_) { /* the passage from the answer stays */ }
}

$("page-prev").addEventListener("click", () => { state.viewer.page -= 1; loadPage(); });
$("page-next").addEventListener("click", () => { state.viewer.page += 1; loadPage(); });
$("viewer-close").addEventListener("click", () => { $("viewer").hidden = true; });

// ---- the library -------------------------------------------------------------------------

async function loadLibrary() {
  const list = await (await api("/api/v1/collections")).json();
  state.collections = list;
  const select = $("collection");
  const chosen = select.value;
  select.replaceChildren(...list.map((c) => el("option", { value: c.name }, c.name)));
  if (list.some((c) => c.name === chosen)) select.value = chosen;
  $("collections").replaceChildren(...list.map((c) =>
    el("li", {}, el("a", { href: "#", onclick: (e) => { e.preventDefault(); select.value = c.name; loadDocuments(c.name); } }, c.name),
      ` · ${fmt(c.documents)} documents · ${fmt(c.chunks)} chunks`, c.updated ? ` · updated ${c.updated}` : "")));
  if (!$("ingest-collection").value) $("ingest-collection").value = select.value;
  if (select.value) loadDocuments(select.value);
}

async function loadDocuments(name) {
  const data = await (await api("/api/v1/documents?" + new URLSearchParams({ collection: name }))).json();
  $("documents-of").textContent = `in ${data.collection}`;
  $("documents").tBodies[0].replaceChildren(...data.documents.map((d) => {
    const meta = d.meta || {};
    const who = [].concat(meta.authors || []).join(", ");
    return el("tr", { class: d.status },
      el("td", {}, d.title || "–"), el("td", { title: d.path }, d.file), el("td", {}, d.format),
      el("td", { class: "num" }, d.pages), el("td", { class: "num" }, d.chunks),
      el("td", { title: d.error || "" }, d.status), el("td", {}, [who, meta.date].filter(Boolean).join(" · ")));
  }));
}

function logLine(text, cls) {
  const line = el("li", { class: cls || "" }, text);
  $("ingest-log").append(line);
  return line;
}

async function ingest(body) {
  const name = $("ingest-collection").value.trim() || collection();
  if (!name) { logLine("name the collection to add the files to", "error"); return; }
  const response = await api("/api/v1/ingest", { method: "POST", json: { collection: name, stream: true, ...body } });
  for await (const { event, data } of events(response)) {
    if (event === "progress") {
      if (data.event === "discovered") logLine(`${data.files} file(s) found`);
      else if (data.event === "file") logLine(`${String(data.path).split(/[\\/]/).pop()}: ${data.status}` + (data.reason ? ` (${data.reason})` : "") + (data.pages ? ` · ${data.pages} pages · ${data.chunks} chunks` : ""), data.status);
      else if (data.event === "embed_start") logLine(`embedding ${data.total} chunks`);
    } else if (event === "report") {
      const c = data.counts;
      logLine(`indexed into ${data.collection}: ${c.ok} new or changed, ${c.unchanged} unchanged, ${c.failed} failed · ${data.total_chunks} chunks`, "done");
      await loadLibrary();
      $("collection").value = data.collection;
      loadDocuments(data.collection);
    } else if (event === "error") {
      logLine(data.error, "error");
    }
  }
}

async function upload(files) {
  const name = $("ingest-collection").value.trim() || collection();
  const staged = [];
  for (const file of files) {
    try {
      const params = new URLSearchParams({ collection: name, name: file.name });
      const response = await api("/api/v1/upload?" + params, { method: "POST", body: file, headers: { "Content-Type": "application/octet-stream" } });
      staged.push((await response.json()).upload);
      logLine(`${file.name}: uploaded`);
    } catch (err) {
      logLine(`${file.name}: ${err.message}`, "error");
    }
  }
  if (staged.length) {
    try { await ingest({ uploads: staged }); } catch (err) { logLine(err.message, "error"); }
  }
}

const drop = $("dropzone");
drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", (e) => { e.preventDefault(); drop.classList.remove("over"); upload([...e.dataTransfer.files]); });
$("file-input").addEventListener("change", (e) => { upload([...e.target.files]); e.target.value = ""; });
if ($("path-form")) {
  $("path-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    try { await ingest({ paths: [$("ingest-path").value] }); } catch (err) { logLine(err.message, "error"); }
  });
}

// ---- history and stats -------------------------------------------------------------------

$("stats-form").addEventListener("submit", (e) => { e.preventDefault(); loadHistory(); });

async function loadHistory() {
  const slo = Number($("slo").value) || null;
  const stats = await (await api("/api/v1/stats?" + new URLSearchParams(slo ? { slo_ms: slo } : {}))).json();
  const rows = await (await api("/api/v1/history?limit=200")).json();
  const lat = stats.latency_ms || {};
  const pairs = [["asks", fmt(stats.asks)], ["P50", `${fmt(lat.p50)} ms`], ["P95", `${fmt(lat.p95)} ms`],
    ["within the objective", stats.slo_compliance === null || stats.slo_compliance === undefined ? "–" : `${fmt(100 * stats.slo_compliance, 1)} %`],
    ["mean k", fmt(stats.mean_k, 1)], ["cost", `${fmt(stats.cost, 6)} ${stats.currency}`]];
  $("stats").replaceChildren(...pairs.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  chart(rows.slice().reverse(), slo);
  $("history").tBodies[0].replaceChildren(...rows.map((r) => el("tr", {},
    el("td", {}, new Date(r.ts * 1000).toLocaleString()), el("td", {}, r.question), el("td", {}, r.collection),
    el("td", { class: "num" }, r.k), el("td", { class: "num" }, fmt(r.total_ms)),
    el("td", { class: "num" }, fmt((r.prompt_tokens || 0) + (r.completion_tokens || 0))),
    el("td", { class: "num" }, fmt(r.confidence, 2)))));
}

// Latency of each ask, oldest first, against the objective (a dashed line).
function chart(rows, slo) {
  const svg = $("latency-chart");
  const NS = "http://www.w3.org/2000/svg";
  const node = (tag, attrs) => { const n = document.createElementNS(NS, tag); for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v); return n; };
  svg.replaceChildren();
  const values = rows.map((r) => r.total_ms || 0);
  if (!values.length) return;
  const top = Math.max(...values, slo || 0) * 1.1 || 1;
  const x = (i) => 40 + (580 * i) / Math.max(1, values.length - 1);
  const y = (v) => 180 - (170 * v) / top;
  svg.append(node("polyline", { points: values.map((v, i) => `${x(i)},${y(v)}`).join(" "), class: "latency" }));
  for (const [i, v] of values.entries()) svg.append(node("circle", { cx: x(i), cy: y(v), r: 2.5, class: slo && v > slo ? "over" : "within" }));
  if (slo) svg.append(node("line", { x1: 40, x2: 620, y1: y(slo), y2: y(slo), class: "slo" }));
  const label = node("text", { x: 2, y: 12, class: "axis" });
  label.textContent = `${fmt(top)} ms`;
  svg.append(label);
}

// ---- evaluations -------------------------------------------------------------------------

async function loadEvals() {
  const runs = await (await api("/api/v1/evals")).json();
  if (!runs.length) {
    $("eval-runs").replaceChildren(el("li", { class: "hint" }, "No runs yet: fathom eval --out FATHOM_HOME/eval-runs/NAME, or fathom serve --runs DIR."));
    return;
  }
  $("eval-runs").replaceChildren(...runs.map((r) => el("li", {},
    el("button", { type: "button", class: "link", onclick: () => loadEval(r.name) }, r.name),
    ` — ${fmt(r.n_questions)} questions, ${r.strategies.length} strategies, judge ${r.judge || "–"}, ${new Date(r.finished * 1000).toLocaleString()}`)));
}

async function loadEval(name) {
  const run = await (await api(`/api/v1/evals/${encodeURIComponent(name)}`)).json();
  const base = `/api/v1/evals/${encodeURIComponent(name)}/`;
  $("eval-run").replaceChildren(
    el("h3", {}, run.title),
    el("table", { class: "eval-summary" },
      el("thead", {}, el("tr", {}, ...run.columns.map((c) => el("th", {}, c)))),
      el("tbody", {}, ...run.rows.map((row) => el("tr", {}, ...row.map((v) => el("td", {}, v)))))),
    el("div", { class: "eval-plots" }, ...run.plots.map((p) =>
      el("figure", {}, el("img", { src: base + encodeURIComponent(p), alt: p, loading: "lazy" }), el("figcaption", {}, p)))));
}
