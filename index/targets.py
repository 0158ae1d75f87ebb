"""What ``ask``, ``chat`` and ``eval`` are pointed at: a file or folder (indexed on first use
into a collection keyed by its content and embedder) or a collection's name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.errors import CollectionNotFound, FathomError

if TYPE_CHECKING:
    from fathom.core.config import Config

Progress = Callable[..., None]


def resolve_target(
    cfg: Config,
    target: str,
    progress: Progress | None = None,
    rebuild: bool = False,
    embedder: Any | None = None,
    password: str | None = None,
) -> str:
    """The collection for ``target``: a file or folder (ingested on first use, with
    ``embedder`` when given; ``password`` opens encrypted PDFs) or a name."""
    from fathom.index.collection import collection_for, collections_root, is_valid_name
    from fathom.index.embed import embedder_id_for
    from fathom.index.ingest import ingest_paths
    from fathom.index.manifest import read_manifest

    path = Path(target)
    if path.exists():
        name = collection_for([path], embedder=embedder_id_for(cfg.embedder))
        manifest = read_manifest(collections_root(cfg) / name)
        # With a password, files that failed before (an encrypted PDF) are tried again.
        retry = (
            password is not None
            and manifest is not None
            and any(d.status == "failed" for d in manifest.documents)
        )
        # The collection is keyed by content: the same files moved or copied elsewhere find it,
        # and a file gone from where it was indexed is adopted at its new path (not re-read).
        moved = manifest is not None and any(
            d.status == "ok" and not d.source_id and not Path(d.path).exists()
            for d in manifest.documents
        )
        if rebuild or manifest is None or retry or moved:
            report = ingest_paths(
                cfg,
                [path],
                name,
                rebuild=rebuild,
                progress=progress,
                embedder=embedder,
                password=password,
            )
            if report.total_chunks == 0:
                reasons = "; ".join(f.reason for f in report.files if f.reason) or "no text"
                raise FathomError(f"{target}: nothing could be indexed ({reasons})")
        elif manifest.n_chunks == 0:  # indexed before, and nothing could be: say so again
            reasons = "; ".join(d.error for d in manifest.documents if d.error) or "no text"
            raise FathomError(f"{target}: nothing could be indexed ({reasons})")
        return name
    if read_manifest(collections_root(cfg) / target) if is_valid_name(target) else None:
        return target
    raise CollectionNotFound(
        f"{target}: no such file, folder or collection — give a PDF, DOCX, TXT or MD file, a "
        "folder, or a name from `fathom collections list`"
    )
