"""Offline OCR for pages that are pictures: scanned PDF pages and image files.

Text lines are found by the PP-OCRv6 detector through rapidocr and read by the PP-OCRv6
recogniser on ONNX Runtime; both models ship inside the ``rapidocr`` wheel (the ``ocr`` extra),
so nothing is downloaded. Fathom runs the recogniser itself rather than through rapidocr: line
images are cut from the full-resolution page (the detector sees a smaller copy), read on
several threads, and each character's position in the line is kept, so a space the recogniser
missed is put back where the ink has a word gap (recognisers run words together now and then,
PP-OCRv4 more than PP-OCRv6, and BM25 cannot match run-together words). The lines then go
through the PDF page layout (``pdf_layout``): reading order across columns, paragraphs,
headings by size and, as a scan shows no font weight, by section number, running headers.

rapidocr, OpenCV and ONNX Runtime are imported when the first page is read; the models are
loaded once per process.
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fathom.ingestion.pdf_layout import Line, Page

OcrMode = Literal["auto", "always", "never"]
OCR_INSTALL = "pip install 'fathom[ocr]'"

DET_MODEL = "PP-OCRv6_det_small.onnx"
REC_MODEL = "PP-OCRv6_rec_small.onnx"
DET_SIDE = 1024  # pixels: the detector sees the page with its longer side at most this
REC_HEIGHT = 48  # the recogniser's input height (fixed by the model)
REC_STRIDE = 8  # input columns per output step of the recogniser
# Horizontal scale of a line image before recognition: 0.8 reads a page in 17 % fewer CPU
# seconds for 0.9 points of word recall (docs/benchmarks.md#ocr).
REC_SQUEEZE = 0.8
REC_BATCH_COLUMNS = 0  # columns per recognition batch; 0: one line per run (fastest measured)
LINE_FLOOR = 0.5  # a detected "line" read with less confidence than this is noise, not text
# An ink gap this wide (in text heights: a space is about 0.3 of the ascender-to-descender
# height) between two characters is a space; narrower ones are letter spacing ("l l").
WORD_GAP_EM = 0.28
# A line with nothing below the baseline ("REACT: SYNERGIZING", "Table of Content") shows ink
# only from the capitals' top to the baseline, about three quarters of the ascender-to-descender
# height its gaps are measured against: without this its word gap would be set too narrow, and
# wide pairs of capitals ("C T") would split.
NO_DESCENDER_HEIGHT = 0.75
_DESCENDERS = frozenset("gjpqyQ,;()[]{}|/@$")


@dataclass(frozen=True, slots=True)
class OcrSettings:
    """How pages without a text layer are read (``ingest.ocr*`` in the configuration)."""

    mode: OcrMode = "auto"
    min_confidence: float = 0.75  # a page read with less mean confidence is unreadable
    dpi: int = 200  # resolution PDF pages are rendered at for OCR
    threads: int = 0  # ONNX Runtime threads; 0: the CPUs this process may use
    page_timeout_s: float = 60.0  # each page OCR reads adds this to the file's time limit


@dataclass(slots=True)
class OcrLine:
    """One recognised line: text, box in image pixels, and mean character confidence."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    score: float


@dataclass(slots=True)
class OcrPage:
    """What OCR read on one image."""

    lines: list[OcrLine] = field(default_factory=list)
    confidence: float = 0.0  # character-weighted mean over the kept lines
    dropped: int = 0  # detected lines below LINE_FLOOR
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def chars(self) -> int:
        return sum(len(ln.text) for ln in self.lines)


def ocr_problem() -> str | None:
    """Why OCR cannot run here (the fix is always ``OCR_INSTALL``), or None when it can."""
    for module in ("rapidocr", "cv2", "onnxruntime"):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"{module} is not installed"
    missing = [m for m in (DET_MODEL, REC_MODEL) if not (_model_dir() / m).is_file()]
    if missing:
        return f"the installed rapidocr lacks the models {', '.join(missing)}"
    return None


def _model_dir() -> Path:
    spec = importlib.util.find_spec("rapidocr")
    if spec is None or not spec.submodule_search_locations:
        return Path("/nonexistent")
    return Path(next(iter(spec.submodule_search_locations))) / "models"


def _threads(requested: int) -> int:
    if requested > 0:
        return requested
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class OcrEngine:
    """Detector + recogniser, loaded on first use; ``read`` turns an image into lines."""

    def __init__(
        self,
        threads: int = 0,
        det_side: int = DET_SIDE,
        squeeze: float = REC_SQUEEZE,
        batch_columns: int = REC_BATCH_COLUMNS,
        rebuild_spaces: bool = True,
        rec_model: str | Path = REC_MODEL,
    ) -> None:
        self.threads = _threads(threads)
        self.det_side = det_side
        self.squeeze = squeeze
        self.batch_columns = batch_columns
        self.rebuild_spaces = rebuild_spaces
        self.rec_model = rec_model  # a file in rapidocr's models folder, or a path
        self._det: Any = None
        self._rec: Any = None
        self._rec_input_name = ""
        self._chars: list[str] = []

    def _load(self) -> None:
        if self._rec is not None:
            return
        import numpy as np
        import onnxruntime as ort
        from rapidocr import RapidOCR

        models = _model_dir()

        def session(model: str, threads: int) -> Any:
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            # Idle threads sleep instead of spinning: on a small shared CPU spinning steals
            # the cores the other threads (and processes) need.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.log_severity_level = 3
            return ort.InferenceSession(
                str(models / model), options, providers=["CPUExecutionProvider"]
            )  # an absolute ``model`` stays as it is

        # rapidocr's detector with its own DB post-processing; explicit model paths, so it
        # never looks for a model to download.
        self._det = RapidOCR(
            params={
                "Global.log_level": "critical",
                "Global.use_cls": False,
                "Global.use_rec": False,
                "Global.max_side_len": 100_000,  # never shrink: line images come from it
                "Det.model_path": str(models / DET_MODEL),
                "Det.limit_type": "max",
                "Det.limit_side_len": self.det_side,
                "EngineConfig.onnxruntime.intra_op_num_threads": self.threads,
            }
        )
        # its ONNX Runtime session, replaced by one whose threads do not spin, and its input
        # normalised in float32 (its defaults are float64: a tenth of a page's time)
        detector = self._det._load_det_model()
        detector.session.session = session(DET_MODEL, self.threads)
        detector.mean = np.array(detector.mean, dtype=np.float32)
        detector.std = np.array(detector.std, dtype=np.float32)
        rec = session(str(self.rec_model), 1)  # parallel over lines instead (see _recognise)
        meta = rec.get_modelmeta().custom_metadata_map
        # CTC classes: blank, the model's characters, then space
        self._chars = ["", *meta["character"].splitlines(), " "]
        self._rec_input_name = rec.get_inputs()[0].name
        self._rec = rec

    def read(self, image: Any) -> OcrPage:
        """Lines of ``image`` (``(h, w)`` uint8 grey or ``(h, w, 3)`` uint8 RGB), top to bottom."""
        import numpy as np

        self._load()
        t0 = time.perf_counter()
        gray = image if image.ndim == 2 else _to_gray(image)
        boxes = self._detect(gray)
        t1 = time.perf_counter()
        page = OcrPage(timings={"detect": t1 - t0})
        if boxes is None or len(boxes) == 0:
            page.seconds = time.perf_counter() - t0
            return page
        crops = [_crop(gray, np.asarray(b, dtype=np.float32)) for b in boxes]
        texts = self._recognise([c for c, _ in crops])
        t2 = time.perf_counter()
        page.timings["recognise"] = t2 - t1
        weighted = 0.0
        for (_, (x0, y0, x1, y1)), (text, score) in zip(crops, texts, strict=True):
            text = " ".join(text.split())
            if not text:
                continue
            if score < LINE_FLOOR:
                page.dropped += 1
                continue
            page.lines.append(OcrLine(text, x0, y0, x1, y1, score))
            weighted += score * len(text)
        page.confidence = weighted / max(1, page.chars)
        page.seconds = time.perf_counter() - t0
        return page

    def _detect(self, gray: Any) -> Any:
        """Text line quadrilaterals ``(n, 4, 2)`` in ``gray``'s pixels (None when none). The
        detector is given a copy with its longer side at ``det_side`` (area-averaged, so thin
        strokes survive the shrink), and its boxes are scaled back to the full page."""
        import cv2
        import numpy as np

        h, w = gray.shape
        scale = min(1.0, self.det_side / max(h, w))
        if scale < 1.0:
            size = (max(1, round(w * scale)), max(1, round(h * scale)))
            gray = cv2.resize(gray, size, interpolation=cv2.INTER_AREA)
        boxes = getattr(self._det(np.repeat(gray[:, :, None], 3, axis=2)), "boxes", None)
        if boxes is None or len(boxes) == 0:
            return None
        return np.asarray(boxes, dtype=np.float32) / scale

    def _recognise(self, crops: list[Any]) -> list[tuple[str, float]]:
        """Text and mean character confidence of each line image. Lines are batched by width
        (``batch_columns``) and the batches read by ``threads`` threads at once, each running
        the model single-threaded: ONNX Runtime releases the GIL, and one line per thread
        scales better on a few cores than one model run spread over them."""
        from concurrent.futures import ThreadPoolExecutor

        inputs = [_rec_input(c, self.squeeze) for c in crops]
        order = sorted(range(len(inputs)), key=lambda i: inputs[i].shape[2])
        batches: list[list[int]] = []
        columns = 0
        for i in order:
            width = inputs[i].shape[2]
            if batches and columns + width <= self.batch_columns:
                batches[-1].append(i)
                columns += width
            else:
                batches.append([i])
                columns = width
        out: list[tuple[str, float]] = [("", 0.0)] * len(inputs)

        def run(batch: list[int]) -> None:
            import numpy as np

            width = max(inputs[i].shape[2] for i in batch)
            x = np.zeros((len(batch), 3, REC_HEIGHT, width), dtype=np.float32)
            for row, i in enumerate(batch):
                x[row, :, :, : inputs[i].shape[2]] = inputs[i]
            probs = self._rec.run(None, {self._rec_input_name: x})[0]
            for row, i in enumerate(batch):
                steps = math.ceil(inputs[i].shape[2] / REC_STRIDE)
                out[i] = self._decode(probs[row, :steps], crops[i])

        if self.threads == 1 or len(batches) == 1:
            for batch in batches:
                run(batch)
        else:
            # longest first, so no thread is left with one long line at the end
            with ThreadPoolExecutor(self.threads) as pool:
                list(pool.map(run, reversed(batches)))
        return out

    def _decode(self, probs: Any, crop: Any) -> tuple[str, float]:
        """Greedy CTC decoding of ``probs`` ``(steps, classes)``; spaces rebuilt from the ink."""
        import numpy as np

        best = probs.argmax(axis=1)
        keep = best != 0
        keep[1:] &= best[1:] != best[:-1]
        steps = np.flatnonzero(keep)
        if len(steps) == 0:
            return "", 0.0
        chars = [self._chars[k] for k in best[steps]]
        score = float(probs[steps, best[steps]].mean())
        if self.rebuild_spaces and len(chars) > 1:
            # an output step covers REC_STRIDE input columns: its centre in crop pixels
            per_step = REC_STRIDE * crop.shape[0] / (REC_HEIGHT * self.squeeze)
            centres = (steps + 0.5) * per_step
            descends = any(c in _DESCENDERS for c in chars)
            chars = _insert_spaces(chars, centres, _word_gaps(crop, descends))
        return "".join(chars), score


def _to_gray(rgb: Any) -> Any:
    import cv2

    return cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)


def _crop(gray: Any, box: Any) -> tuple[Any, tuple[float, float, float, float]]:
    """The line image inside a detected quadrilateral ``box`` ``(4, 2)`` (clockwise from top
    left), straightened, and its bounding box."""
    import cv2
    import numpy as np

    xs, ys = box[:, 0], box[:, 1]
    bounds = (float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max()))
    width = int(max(np.linalg.norm(box[0] - box[1]), np.linalg.norm(box[2] - box[3])))
    height = int(max(np.linalg.norm(box[0] - box[3]), np.linalg.norm(box[1] - box[2])))
    width, height = max(width, 1), max(height, 1)
    if abs(box[0, 1] - box[1, 1]) < 1.0 and abs(box[0, 0] - box[3, 0]) < 1.0:
        x0, y0 = max(0, round(bounds[0])), max(0, round(bounds[1]))
        crop = gray[y0 : y0 + height, x0 : x0 + width]
    else:  # a skewed line: straighten it
        target = np.array([[0, 0], [width, 0], [width, height], [0, height]], dtype=np.float32)
        matrix = cv2.getPerspectiveTransform(box, target)
        crop = cv2.warpPerspective(
            gray, matrix, (width, height), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_LINEAR
        )
    if crop.shape[0] >= 1.5 * crop.shape[1]:  # a vertical line of text: read it turned
        crop = np.ascontiguousarray(np.rot90(crop))
    return crop, bounds


def _rec_input(crop: Any, squeeze: float) -> Any:
    """A line image as the recogniser's input ``(3, 48, width)`` float32 in [-1, 1]."""
    import cv2
    import numpy as np

    h, w = crop.shape[:2]
    width = max(REC_STRIDE, math.ceil(REC_HEIGHT * w / max(h, 1) * squeeze))
    resized = cv2.resize(crop, (width, REC_HEIGHT), interpolation=cv2.INTER_LINEAR)
    x = resized.astype(np.float32) * (2.0 / 255.0) - 1.0
    return np.broadcast_to(x, (3, REC_HEIGHT, width))


def _word_gaps(crop: Any, descends: bool = True) -> list[float]:
    """Centres (crop pixels) of the column runs without ink that are wide enough to be spaces:
    wider than ``WORD_GAP_EM`` text heights and than 2.5 times the line's typical letter gap
    (so letter-spaced capitals do not break into letters). ``descends``: whether the line's
    text reaches below the baseline; if not, its ink is that much shorter than a text height."""
    import cv2
    import numpy as np

    _, ink = cv2.threshold(crop, 0, 1, cv2.THRESH_BINARY_INV | cv2.THRESH_OTSU)
    rows = np.flatnonzero(ink.sum(axis=1) > 0)
    if len(rows) == 0:
        return []
    text_height = rows[-1] - rows[0] + 1
    if not descends:
        text_height /= NO_DESCENDER_HEIGHT
    cols = np.flatnonzero(ink.sum(axis=0) > 0)
    if len(cols) < 2:
        return []
    # runs of empty columns between the first and last inked column
    jumps = np.flatnonzero(np.diff(cols) > 1)
    if len(jumps) == 0:
        return []
    starts, ends = cols[jumps] + 1, cols[jumps + 1]
    widths = ends - starts
    floor = max(WORD_GAP_EM * text_height, 2.5 * float(np.median(widths)))
    wide = widths >= floor
    return [float(c) for c in ((starts[wide] + ends[wide]) / 2)]


def _insert_spaces(chars: list[str], centres: Any, gaps: list[float]) -> list[str]:
    """Put a space between two letters (or a letter and a digit) whose positions straddle a word
    gap in the ink that no space the recogniser read accounts for; never next to punctuation,
    whose spacing the recogniser reads better than the ink, nor between two digits."""
    import numpy as np

    free = np.asarray(gaps, dtype=float)
    # Each space the recogniser read takes the gap nearest to it: its neighbours' positions
    # are only approximate, and a gap it already filled must not split a word next to it.
    for i, ch in enumerate(chars):
        if ch == " " and len(free):
            free = np.delete(free, int(np.abs(free - centres[i]).argmin()))
    if not len(free):
        return chars
    out = [chars[0]]
    for i in range(1, len(chars)):
        a, b = out[-1], chars[i]
        # digits are set on a fixed width: a "1" leaves a wide gap inside "10"
        if a.isalnum() and b.isalnum() and not (a.isdigit() and b.isdigit()):
            between = (free > centres[i - 1]) & (free < centres[i])
            if between.any():
                out.append(" ")
        out.append(b)
    return out


_ENGINES: dict[int, OcrEngine] = {}


def engine(threads: int = 0) -> OcrEngine:
    """This process's engine (models load once per process)."""
    key = _threads(threads)
    if key not in _ENGINES:
        _ENGINES[key] = OcrEngine(threads=key)
    return _ENGINES[key]


# ---------------------------------------------------------------------------------------------
# From recognised lines to a laid-out page
# ---------------------------------------------------------------------------------------------

_SIZE_PER_HEIGHT = 0.7  # a line box's height (with the detector's margin) to a font size
# Lines of one block differ in box height by less than this factor. Boxes of one paragraph
# differ by up to ~25 % (a line without descenders is shorter), so a heading and the
# paragraph under it may share a block: pdf_layout tells them apart by each line's size.
_SAME_SIZE = 1.5


def layout_page(number: int, ocr: OcrPage, width: float, height: float, scale: float) -> Page:
    """A ``Page`` of ``Line``s in points (``scale`` points per pixel), grouped into blocks the
    way a PDF's text layer groups them, for ``pdf_layout``'s reading order and paragraphs."""
    page = Page(number, width * scale, height * scale)
    lines = sorted(ocr.lines, key=lambda ln: (ln.y0, ln.x0))
    blocks: list[list[Line]] = []
    for ocr_line in lines:
        x0, y0, x1, y1 = (v * scale for v in (ocr_line.x0, ocr_line.y0, ocr_line.x1, ocr_line.y1))
        h = y1 - y0
        size = round(h * _SIZE_PER_HEIGHT * 2) / 2
        line = Line(ocr_line.text, x0, y0, x1, y1, size, 0, y1 - 0.25 * h)
        block = _block_for(blocks, line)
        if block is None:
            blocks.append([line])
            line.block = len(blocks) - 1
        else:
            line.block = blocks[block][0].block
            blocks[block].append(line)
    page.lines = [ln for members in blocks for ln in members]
    _body_size_for_long_lines(page.lines)
    return page


def _body_size_for_long_lines(lines: list[Line]) -> None:
    """Give the body's size to lines that are not clearly larger. A box's height varies by up
    to a quarter with the ascenders, descenders and brackets in its line, so only a line over
    ``_LARGER`` times the body's height is set in larger type; and a heading is short, so a
    line of many words across most of the column is body whatever it measures."""
    if len(lines) < 3:
        return
    sizes = sorted(ln.size for ln in lines for _ in range(len(ln.text)))
    body = sizes[len(sizes) // 2]
    widest = max(ln.x1 - ln.x0 for ln in lines)
    for ln in lines:
        long = len(ln.text.split()) > 8 and ln.x1 - ln.x0 > 0.6 * widest
        if ln.size > body and (ln.size < _LARGER * body or long):
            ln.size = body


_LARGER = 1.35


def _block_for(blocks: list[list[Line]], line: Line) -> int | None:
    """The block whose last line sits just above ``line`` in the same column, if any."""
    h = line.y1 - line.y0
    for index in range(len(blocks) - 1, -1, -1):
        last = blocks[index][-1]
        last_h = last.y1 - last.y0
        overlap = min(last.x1, line.x1) - max(last.x0, line.x0)
        if (
            overlap > 0.5 * min(last.x1 - last.x0, line.x1 - line.x0)
            and -0.5 * h < line.y0 - last.y1 < 0.8 * max(h, last_h)
            and 1 / _SAME_SIZE < h / max(last_h, 1e-6) < _SAME_SIZE
        ):
            return index
    return None
