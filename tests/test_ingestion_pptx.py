"""PptxLoader: a slide is a page, its title its section, tables as rows, notes kept and marked;
broken files refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from fathom.bench.support import docgen
from fathom.core.errors import ParseError
from fathom.ingestion import load_document
from fathom.ingestion.slides import NOTES_MARK


def test_slides_are_pages_with_titles_tables_and_notes(tmp_path: Path) -> None:
    doc = load_document(docgen.make_pptx(tmp_path / "deck.pptx"))
    assert doc.format == "pptx" and doc.title == "Harvest Review"
    assert [p.number for p in doc.pages] == [1, 2]
    assert [(s.title, s.level) for s in doc.sections] == [
        ("Quarterly Harvest", 1),
        ("Storage Plan", 1),
    ]
    (title1, body1, notes1), (title2, body2, _) = docgen.PPTX_SLIDES
    one, two = (doc.text[p.start : p.end] for p in doc.pages)
    assert one.startswith(title1) and body1[0] in one
    assert f"{NOTES_MARK} {notes1}" in one
    assert two.startswith(title2) and body2[0] in two
    assert "Orchard | Tonnes\nNorth | 340\nSouth | 215" in two
    assert doc.page_at(doc.text.index("North | 340")) == 2
    assert doc.section_at(doc.text.index("North | 340")) == "Storage Plan"


def _not_a_zip(path: Path) -> Path:
    path.write_bytes(b"not a zip, just bytes")
    return path


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (_not_a_zip, "not a zip"),
        (lambda p: docgen.make_pptx_without(p, "ppt/slides/slide1.xml"), "cannot be read"),
        (lambda p: docgen.make_pptx_without(p, "ppt/presentation.xml"), "cannot be opened"),
    ],
)
def test_broken_pptx_is_one_line(tmp_path: Path, make, fragment: str) -> None:
    path = make(tmp_path / "broken.pptx")
    with pytest.raises(ParseError) as info:
        load_document(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message and fragment in message


def _point(model_id: int, text: str, kind: str = "") -> str:
    """A diagram data point holding ``text`` (a ``kind`` of "" is a node)."""
    typed = f' type="{kind}"' if kind else ""
    runs = "".join(f"<a:r><a:t>{part}</a:t></a:r>" for part in text.split("|"))
    return (
        f'<dgm:pt modelId="{{{model_id}}}"{typed}><dgm:prSet/><dgm:spPr/>'
        f"<dgm:t><a:bodyPr/><a:p>{runs}</a:p></dgm:t></dgm:pt>"
    )


_DIAGRAM_DATA = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<dgm:dataModel xmlns:dgm="http://schemas.openxmlformats.org/drawingml/2006/diagram"'
    ' xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><dgm:ptLst>'
    + _point(0, "", "doc")
    + _point(1, "Collect the| samples")  # two runs make one node's text
    + _point(2, "connector", "parTrans")
    + _point(3, "Seal the vials")
    + '<dgm:pt modelId="{4}" type="pres"><dgm:prSet presName="node"/><dgm:spPr/></dgm:pt>'
    + "</dgm:ptLst><dgm:cxnLst/></dgm:dataModel>"
)


def _with_smartart(path: Path) -> Path:
    """A deck whose slide holds a group shape and a SmartArt diagram (a graphic frame whose
    data part python-pptx does not read): the diagram's parts are written by hand."""
    from pptx import Presentation
    from pptx.opc.constants import RELATIONSHIP_TYPE as RT
    from pptx.opc.package import Part
    from pptx.opc.packuri import PackURI
    from pptx.oxml import parse_xml
    from pptx.util import Inches

    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[5])
    slide.shapes.title.text = "Sampling Procedure"
    group = slide.shapes.add_group_shape()
    box = group.shapes.add_textbox(Inches(1), Inches(5), Inches(3), Inches(1))
    box.text_frame.text = "Label every vial with the site code"
    part = Part(
        PackURI("/ppt/diagrams/data1.xml"),
        "application/vnd.openxmlformats-officedocument.drawingml.diagramData+xml",
        prs.part.package,
        _DIAGRAM_DATA.encode(),
    )
    rid = slide.part.relate_to(part, RT.DIAGRAM_DATA)
    frame = parse_xml(
        '<p:graphicFrame xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
        ' xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
        ' xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
        '<p:nvGraphicFramePr><p:cNvPr id="90" name="Diagram 1"/><p:cNvGraphicFramePr/><p:nvPr/>'
        '</p:nvGraphicFramePr><p:xfrm><a:off x="914400" y="1828800"/><a:ext cx="6000000"'
        ' cy="2000000"/></p:xfrm><a:graphic><a:graphicData'
        ' uri="http://schemas.openxmlformats.org/drawingml/2006/diagram">'
        '<dgm:relIds xmlns:dgm="http://schemas.openxmlformats.org/drawingml/2006/diagram"'
        f' r:dm="{rid}" r:lo="" r:qs="" r:cs=""/></a:graphicData></a:graphic></p:graphicFrame>'
    )
    slide.shapes._spTree.append(frame)
    prs.save(str(path))
    return path


def test_smartart_nodes_and_grouped_shapes_are_read(tmp_path: Path) -> None:
    doc = load_document(_with_smartart(tmp_path / "diagram.pptx"))
    text = doc.text
    assert "Collect the samples" in text and "Seal the vials" in text
    assert "connector" not in text  # a connector's label is not the author's text
    # the diagram (higher on the slide) comes before the grouped text box below it
    assert text.index("Seal the vials") < text.index("Label every vial with the site code")
    assert doc.section_at(text.index("Seal the vials")) == "Sampling Procedure"
