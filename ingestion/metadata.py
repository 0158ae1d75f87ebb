"""Document metadata as data: title, authors, organisation, date and version, read at ingest.

Two kinds of evidence, merged field by field (``merge``):

- the file's own properties: a PDF's info dictionary and XMP packet, DOCX/PPTX core properties
  (and the company in ``docProps/app.xml``), HTML ``<meta>`` tags and what trafilatura reads of
  the page, an EPUB's package (OPF) metadata. Values that are not the document's (a producer
  string, "Microsoft Word - draft.docx", an author such as "user" or "admin", a template's
  defaults) are dropped;
- the title block of a PDF's (or a scan's) first page: the largest type near the top is the
  title, the short lines under it name the authors, their organisation, the date and the
  version.

Every reader here catches its own errors and returns what it could read: metadata never makes a
load fail. Libraries are imported where a reader needs them.
"""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any
from xml.etree import ElementTree

from fathom.core.base import DocMeta
from fathom.ingestion.clean import Assembled
from fathom.ingestion.meta_values import (
    PROPERTIES,
    Found,
    clean,
    find_version,
    good_organisation,
    good_person,
    good_title,
    guarded,
    merge,
    property_date,
    split_people,
    unique,
    with_text_fallback,
)
from fathom.ingestion.pdf_layout import Line, Page
from fathom.ingestion.title_block import title_block

__all__ = [
    "docx_title_block",
    "epub_properties",
    "guarded",
    "html_properties",
    "merge",
    "office_properties",
    "pdf_properties",
    "title_block",
    "with_text",
    "with_text_fallback",
]

# ---------------------------------------------------------------------------------------------
# File properties, one reader per format
# ---------------------------------------------------------------------------------------------

_XMP_NS = {
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "dc": "http://purl.org/dc/elements/1.1/",
    "xmp": "http://ns.adobe.com/xap/1.0/",
    "pdf": "http://ns.adobe.com/pdf/1.3/",
    "prism": "http://prismstandard.org/namespaces/basic/2.0/",
}


def pdf_properties(doc: Any) -> DocMeta:
    """A PyMuPDF document's info dictionary and XMP packet (its ``dc:creator`` list of
    authors, ``dc:publisher``), and a ``/Company`` in the info dictionary."""
    info = {k: clean(v) for k, v in (doc.metadata or {}).items() if v}
    xmp = _xmp(doc)
    software = {info.get("creator", "").lower(), info.get("producer", "").lower()} - {""}
    found = Found()
    found.put("title", good_title(info.get("title")) or good_title(xmp.get("title")), PROPERTIES)
    people = xmp.get("creators") or ()
    authors = unique(good_person(p) for p in people) or split_people(info.get("author"))
    authors = tuple(a for a in authors if a.lower() not in software)
    found.put("authors", authors, PROPERTIES)
    found.put("organisation", good_organisation(xmp.get("publisher")), PROPERTIES)
    found.put("organisation", good_organisation(_info_key(doc, "Company")), PROPERTIES)
    for value in (xmp.get("date"), info.get("creationDate"), xmp.get("created")):
        if found.put("date", property_date(value), PROPERTIES):
            break
    return found.meta()


def _xmp(doc: Any) -> dict[str, Any]:
    """What the XMP packet says: title, creators (a list), publisher, date, created."""
    try:
        raw = doc.get_xml_metadata() or ""
    except Exception:  # a damaged metadata stream
        return {}
    if not raw.strip():
        return {}
    root = ElementTree.fromstring(raw.encode("utf-8") if isinstance(raw, str) else raw)
    ns = _XMP_NS

    def items(path: str) -> list[str]:
        out: list[str] = []
        for el in root.iter(f"{{{ns['dc']}}}{path}"):
            lis = list(el.iter(f"{{{ns['rdf']}}}li"))
            out.extend(clean(li.text) for li in lis) if lis else out.append(clean(el.text))
        return [v for v in out if v]

    created = ""
    for el in root.iter(f"{{{ns['xmp']}}}CreateDate"):
        created = clean(el.text)
    for desc in root.iter(f"{{{ns['rdf']}}}Description"):  # attributes form
        created = created or clean(desc.get(f"{{{ns['xmp']}}}CreateDate"))
    titles, dates, publishers = items("title"), items("date"), items("publisher")
    return {
        "title": titles[0] if titles else "",
        "creators": items("creator"),
        "publisher": publishers[0] if publishers else "",
        "date": dates[0] if dates else "",
        "created": created,
    }


def _info_key(doc: Any, key: str) -> str:
    """A non-standard key of the PDF's info dictionary ('' when absent)."""
    kind, ref = doc.xref_get_key(-1, "Info")
    if kind != "xref":
        return ""
    kind, value = doc.xref_get_key(int(ref.split()[0]), key)
    return value if kind == "string" else ""


# python-docx and python-pptx save their templates' own properties when a script sets none.
_TEMPLATE_DATES = frozenset({"2013-12-23", "2013-01-27", "2012-08-23"})


def office_properties(core: Any, data: bytes = b"") -> DocMeta:
    """DOCX/PPTX core properties (title, author, created, version) and the company that
    ``docProps/app.xml`` of the archive ``data`` names."""
    found = Found()
    found.put("title", good_title(core.title), PROPERTIES)
    authors = split_people(core.author)
    found.put("authors", authors, PROPERTIES)
    created = property_date(core.created)
    if created and (created[1][:10] not in _TEMPLATE_DATES or not authors):
        found.put("date", created if created[1][:10] not in _TEMPLATE_DATES else None, PROPERTIES)
    version = clean(getattr(core, "version", ""))
    if version and re.search(r"\d", version) and len(version) <= 30:
        found.put("version", version, PROPERTIES)
    if data:
        found.put("organisation", good_organisation(_app_company(data)), PROPERTIES)
    return found.meta()


def docx_title_block(document: Any, paragraphs: int = 40) -> DocMeta:
    """The title block of a DOCX's opening paragraphs, read as a first page whose lines are
    set in each paragraph's type size (its runs', else its style's): a cover's large title,
    the organisation above it, the date under it."""
    lines: list[Line] = []
    y = 0.0
    for para in document.paragraphs[:paragraphs]:
        text = " ".join(para.text.split())
        if not text:
            continue
        size = _paragraph_size(para)
        lines.append(Line(text, 72.0, y, 72.0 + 6 * len(text), y + size, size, len(lines), y))
        y += 1.4 * size
    return title_block([Page(1, 612.0, 0.0, lines)]) if lines else DocMeta()


def _paragraph_size(para: Any) -> float:
    sizes = [r.font.size.pt for r in para.runs if r.text.strip() and r.font.size is not None]
    if sizes:
        return max(sizes)
    style = para.style
    while style is not None:
        if style.font.size is not None:
            return float(style.font.size.pt)
        style = style.base_style
    return 11.0


def _app_company(data: bytes) -> str:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        if "docProps/app.xml" not in archive.namelist():
            return ""
        info = archive.getinfo("docProps/app.xml")
        if info.file_size > 1 << 20:
            return ""
        raw = archive.read(info)
    root = ElementTree.fromstring(raw)
    for el in root.iter():
        if el.tag.rsplit("}", 1)[-1] == "Company":
            return clean(el.text)
    return ""


_HTML_KEYS: dict[str, tuple[str, ...]] = {
    "title": ("citation_title", "dc.title", "dcterms.title", "og:title", "twitter:title"),
    "authors": ("citation_author", "dc.creator", "dcterms.creator", "author", "article:author",
                "parsely-author", "sailthru.author"),
    "date": ("citation_publication_date", "citation_date", "citation_online_date",
             "dc.date.issued", "dcterms.issued", "dc.date", "dcterms.date",
             "article:published_time", "datepublished", "pubdate", "publish_date", "date",
             "sailthru.date"),
    "organisation": ("citation_technical_report_institution", "citation_dissertation_institution",
                     "citation_publisher", "dc.publisher", "dcterms.publisher", "publisher",
                     "og:site_name"),
    "version": ("citation_version", "version"),
}  # fmt: skip


def html_properties(root: Any, data: bytes = b"") -> DocMeta:
    """An HTML page's ``<meta>`` tags (citation_*, Dublin Core, Open Graph, article:*), then
    what trafilatura's metadata extraction reads of ``data`` (JSON-LD among it)."""
    tags: dict[str, list[str]] = {}
    for el in root.iter("meta"):
        key = (el.get("name") or el.get("property") or el.get("itemprop") or "").strip().lower()
        content = clean(el.get("content"))
        if key and content:
            tags.setdefault(key, []).append(content)
    found = Found()
    for name, keys in _HTML_KEYS.items():
        for key in keys:
            values = tags.get(key, [])
            if not values:
                continue
            if name == "title":
                value: Any = good_title(values[0])
            elif name == "authors":
                value = unique(a for v in values for a in split_people(v))
            elif name == "date":
                value = property_date(values[0])
            elif name == "organisation":
                value = good_organisation(values[0])
            else:
                value = find_version(values[0]) or (values[0] if len(values[0]) <= 30 else "")
            if found.put(name, value, PROPERTIES):
                break
    if data:
        _trafilatura_meta(found, data)
    return found.meta()


def _trafilatura_meta(found: Found, data: bytes) -> None:
    """Fill what the tags left empty from trafilatura's reading of the page."""
    if all(f in found.origin for f in ("title", "authors", "date", "organisation")):
        return
    from trafilatura.metadata import extract_metadata

    meta = extract_metadata(data)
    if meta is None:
        return
    found.put("title", good_title(getattr(meta, "title", "")), PROPERTIES)
    found.put("authors", split_people(getattr(meta, "author", "")), PROPERTIES)
    found.put("date", property_date(getattr(meta, "date", "")), PROPERTIES)
    found.put("organisation", good_organisation(getattr(meta, "sitename", "")), PROPERTIES)


def epub_properties(book: Any) -> DocMeta:
    """An EPUB's package metadata: ``dc:title``, ``dc:creator`` (each), ``dc:date``,
    ``dc:publisher``."""

    def values(name: str) -> list[str]:
        return [clean(v[0]) for v in book.get_metadata("DC", name) or () if v and v[0]]

    found = Found()
    titles = values("title")
    found.put("title", good_title(titles[0]) if titles else "", PROPERTIES)
    found.put("authors", unique(a for v in values("creator") for a in split_people(v)), PROPERTIES)
    for value in values("date"):
        if found.put("date", property_date(value), PROPERTIES):
            break
    publishers = values("publisher")
    found.put("organisation", good_organisation(publishers[0]) if publishers else "", PROPERTIES)
    return found.meta()


def with_text(meta: DocMeta, assembled: Assembled) -> DocMeta:
    """``meta`` with what the assembled document's opening text states where ``meta`` has
    nothing (``with_text_fallback``); ``meta`` itself when that fails."""
    first = assembled.headings[0] if assembled.headings else ""
    try:
        return with_text_fallback(meta, assembled.text, first)
    except Exception:  # metadata never fails a load: keep what the properties gave
        return meta
