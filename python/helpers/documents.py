"""Documents as text for the document_query tool (docs/documents.md).

A source is a local path (relative paths are in the work folder; absolute ones must be in
the work folder or usr/uploads; ``file://`` is accepted) or an ``http(s)://`` URL, fetched
by python/helpers/url_fetch.py. The loader is chosen by the file extension, then by the
answer's Content-Type:

- PDF: pypdf (pure Python, no native dependency; an encrypted PDF is refused unless it
  opens with an empty password; a PDF without a text layer is refused: there is no OCR).
- HTML: trafilatura's main-text extraction when the optional extra is installed
  (requirements-documents.txt), else the standard library's HTML parser (all visible text).
- DOCX, PPTX, XLSX: markitdown, only with the optional extra.
- Text, Markdown, CSV, JSON and other text: decoded as UTF-8 (or the declared charset).

Every failure is a ``DocumentError`` with a stable ``code`` and a message the agent can act
on; nothing here raises anything else for bad input.
"""

from __future__ import annotations

import asyncio
import importlib
import io
import json
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from python.helpers import files
from python.helpers.errors import CodeError
from python.helpers.html_text import visible_text
from python.helpers.url_fetch import FetchError, fetch

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_TIMEOUT = 30
EXTRA_HINT = "pip install -r requirements-documents.txt (docs/documents.md)"

_TEXT_SUFFIXES = set(
    [
        ".txt",
        ".md",
        ".markdown",
        ".csv",
        ".tsv",
        ".json",
        ".jsonl",
        ".log",
        ".yaml",
        ".yml",
        ".xml",
        ".rst",
        ".ini",
        ".toml",
        ".py",
        ".js",
        ".ts",
        ".sh",
        ".sql",
    ]
)
_OFFICE_SUFFIXES = {".docx", ".pptx", ".xlsx"}
_HTML_TYPES = {"text/html", "application/xhtml+xml"}
_OFFICE_TYPES = {
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
}


class DocumentError(CodeError):
    """A document that cannot be read; ``code`` is stable (docs/errors.md)."""


@dataclass(frozen=True)
class Document:
    source: str  # as the agent named it
    kind: str  # pdf, html, docx, pptx, xlsx, text
    text: str


@dataclass(frozen=True)
class Limits:
    max_bytes: int = DEFAULT_MAX_BYTES
    timeout: float = DEFAULT_TIMEOUT
    allow_private: bool = False

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> Limits:
        return cls(
            max_bytes=int(settings.get("document_query_max_bytes") or DEFAULT_MAX_BYTES),
            timeout=float(settings.get("document_query_timeout") or DEFAULT_TIMEOUT),
            allow_private=bool(settings.get("document_query_allow_private_addresses")),
        )


def is_url(source: str) -> bool:
    return "://" in source and not source.lower().startswith("file://")


def local_path(source: str, workdir: Path) -> Path:
    """The file a local source names; it must be inside the work folder or usr/uploads."""
    raw = source
    if raw.lower().startswith("file://"):
        raw = unquote(urlsplit(raw).path)
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = workdir / path
    resolved = path.resolve()
    roots = [workdir.resolve(), (files.usr_dir() / "uploads").resolve()]
    if not any(resolved == root or root in resolved.parents for root in roots):
        raise DocumentError(
            "document_path_refused",
            f"{source}: only files in the work folder ({roots[0]}) or in the uploads folder "
            f"({roots[1]}) are read; copy the file there first.",
        )
    return resolved


def _read_file(path: Path, source: str, max_bytes: int) -> bytes:
    if not path.exists():
        raise DocumentError("document_not_found", f"{source}: no such file.")
    if not path.is_file():
        raise DocumentError("document_unreadable", f"{source} is not a regular file.")
    size = path.stat().st_size
    if size > max_bytes:
        raise DocumentError(
            "document_too_large",
            f"{source} has {size} bytes, more than {max_bytes} (setting document_query_max_bytes).",
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DocumentError(
            "document_unreadable", f"{source} cannot be read ({exc.strerror or exc})."
        ) from None


def kind_of(name: str, content_type: str = "") -> str:
    """pdf, html, docx, pptx, xlsx or text, by extension first, then by media type."""
    suffix = Path(urlsplit(name).path if is_url(name) else name).suffix.lower()
    if suffix == ".pdf":
        return "pdf"
    if suffix in (".html", ".htm", ".xhtml"):
        return "html"
    if suffix in _OFFICE_SUFFIXES:
        return suffix[1:]
    if suffix in _TEXT_SUFFIXES:
        return "text"
    if content_type == "application/pdf":
        return "pdf"
    if content_type in _HTML_TYPES:
        return "html"
    if content_type in _OFFICE_TYPES:
        return _OFFICE_TYPES[content_type][1:]
    guessed = content_type or (mimetypes.guess_type(name)[0] or "")
    if guessed.startswith("text/") or guessed.endswith(("json", "xml", "yaml")):
        return "html" if guessed in _HTML_TYPES else "text"
    return "text" if not guessed else "unsupported:" + guessed


# the loaders ------------------------------------------------------------------------------
def pdf_text(data: bytes, source: str) -> str:
    """The text layer of a PDF, page by page (pypdf)."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentError(
                "document_encrypted",
                f"{source} is an encrypted PDF that needs a password; ask the user for an "
                "unprotected copy.",
            )
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except DocumentError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise DocumentError(
            "document_unreadable", f"{source} is not a readable PDF ({type(exc).__name__})."
        ) from None
    except Exception as exc:  # pypdf raises many things on damaged input; all mean the same
        raise DocumentError(
            "document_unreadable", f"{source} is not a readable PDF ({type(exc).__name__})."
        ) from None
    text = "\n\n".join(p for p in pages if p)
    if not text.strip():
        raise DocumentError(
            "document_unreadable",
            f"{source} has no text layer (a scanned PDF?); there is no OCR here.",
        )
    return text


#: Elements whose text is not shown (the fallback without trafilatura).
_HIDDEN = ("script", "style", "noscript", "template", "head", "svg")


def html_text_fallback(html: str) -> str:
    lines = (" ".join(line.split()) for line in visible_text(html, _HIDDEN).splitlines())
    return "\n".join(line for line in lines if line)


def _optional(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def html_text(html: str) -> str:
    """The page's main text as Markdown (trafilatura), else all visible text."""
    trafilatura = _optional("trafilatura")
    if trafilatura is not None:
        extracted = trafilatura.extract(
            html, output_format="markdown", include_tables=True, include_links=False
        )
        if extracted and extracted.strip():
            return str(extracted)
    return html_text_fallback(html)


def office_text(data: bytes, suffix: str, source: str) -> str:
    markitdown = _optional("markitdown")
    if markitdown is None:
        raise DocumentError(
            "document_unsupported",
            f"{source}: reading {suffix} files needs the optional documents extra "
            f"({EXTRA_HINT}); ask the operator, or convert the file to PDF or text.",
        )
    try:
        result = markitdown.MarkItDown().convert_stream(io.BytesIO(data), file_extension=suffix)
    except Exception as exc:  # a damaged file: any converter error means the same
        raise DocumentError(
            "document_unreadable", f"{source} is not a readable {suffix} file ({exc})."
        ) from None
    return str(result.text_content or "")


def decode_text(data: bytes, charset: str | None, source: str) -> str:
    if b"\x00" in data[:8192]:
        raise DocumentError(
            "document_unsupported", f"{source} looks binary; it is not a supported document."
        )
    try:
        return data.decode(charset or "utf-8")
    except (UnicodeDecodeError, LookupError):
        return data.decode("utf-8", errors="replace")


def to_text(data: bytes, kind: str, source: str, charset: str | None = None) -> str:
    if kind == "pdf":
        return pdf_text(data, source)
    if kind == "html":
        return html_text(decode_text(data, charset, source))
    if kind in ("docx", "pptx", "xlsx"):
        return office_text(data, "." + kind, source)
    if kind == "text":
        text = decode_text(data, charset, source)
        if source.lower().endswith(".json"):
            try:  # pretty-printed JSON chunks better than one long line
                return json.dumps(json.loads(text), indent=1, ensure_ascii=False)
            except ValueError:
                return text
        return text
    raise DocumentError(
        "document_unsupported",
        f"{source}: {kind.partition(':')[2] or 'this type'} is not a supported document type "
        "(PDF, HTML, text, Markdown, CSV, JSON; DOCX/PPTX/XLSX with the documents extra).",
    )


async def load(source: str, workdir: Path, limits: Limits) -> Document:
    """Read one document as text; DocumentError for anything the agent should hear about."""
    source = source.strip()
    if not source:
        raise DocumentError("document_not_found", "an empty document name.")
    if is_url(source):
        try:
            fetched = await fetch(
                source,
                allow_private=limits.allow_private,
                max_bytes=limits.max_bytes,
                timeout=limits.timeout,
            )
        except FetchError as exc:
            raise DocumentError(exc.code, exc.message) from None
        kind = kind_of(fetched.url, fetched.content_type)
        data, charset = fetched.body, fetched.charset
    else:
        path = local_path(source, workdir)
        data = await asyncio.to_thread(_read_file, path, source, limits.max_bytes)
        kind, charset = kind_of(str(path)), None
    text = await asyncio.to_thread(to_text, data, kind, source, charset)
    if not text.strip():
        raise DocumentError("document_unreadable", f"{source} holds no text.")
    return Document(source, kind.partition(":")[0], text)
