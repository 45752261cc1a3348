"""Knowledge files: where they live, how each kind is read, and how text is cut in chunks.

Folders (upstream's layout under ``usr/``): ``usr/knowledge/<agent_knowledge_subdir>/``
(default ``custom``) and ``usr/knowledge/default/``. A file directly in a root goes to area
``main``; a file under ``<root>/<area>/`` (at any depth) goes to that area. Dot-files,
files in dot-folders, files without an extension and kinds we do not read are skipped.
Kinds: Markdown, text and JSON as text; PDF per page (pypdf); CSV per row; HTML as its
visible text. Nothing here touches the database (python/durable/memory_service.py does).
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from python.helpers.html_text import visible_text

KNOWLEDGE_DIR = "knowledge"
DEFAULT_ROOT = "default"
DEFAULT_CUSTOM = "custom"
KINDS = ("md", "txt", "json", "pdf", "csv", "html", "htm")
CHUNK_CHARS = 4000  # about LangChain's default splitter, as upstream
CHUNK_OVERLAP = 200
MAX_FILE_BYTES = 50 * 1024 * 1024
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


class KnowledgeFileError(Exception):
    """A knowledge file that cannot be read (reported in the import status, then skipped)."""


@dataclass(frozen=True)
class KnowledgeFile:
    path: Path  # absolute
    rel: str  # relative to usr/, with forward slashes (what the journal records)
    area: str
    kind: str


def knowledge_subdir(settings: Mapping[str, Any]) -> str:
    value = str(settings.get("agent_knowledge_subdir") or DEFAULT_CUSTOM).strip()
    return value if _NAME.match(value) and value not in (".", "..") else DEFAULT_CUSTOM


def custom_dir(usr: Path, settings: Mapping[str, Any]) -> Path:
    """Where uploads go (``import_knowledge``) and what ``knowledge_path_get`` names."""
    return usr / KNOWLEDGE_DIR / knowledge_subdir(settings)


def roots(usr: Path, settings: Mapping[str, Any]) -> list[Path]:
    """The knowledge roots, the custom one first (upstream's order)."""
    found = [custom_dir(usr, settings), usr / KNOWLEDGE_DIR / DEFAULT_ROOT]
    return list(dict.fromkeys(found))


def ensure_folders(usr: Path, settings: Mapping[str, Any]) -> None:
    """The custom root with its ``main`` and ``solutions`` folders, and the default root."""
    custom = custom_dir(usr, settings)
    for folder in (custom / "main", custom / "solutions", usr / KNOWLEDGE_DIR / DEFAULT_ROOT):
        folder.mkdir(parents=True, exist_ok=True)


def scan(usr: Path, settings: Mapping[str, Any]) -> list[KnowledgeFile]:
    """Every knowledge file we read, by relative path (a file seen from two roots once)."""
    found: dict[str, KnowledgeFile] = {}
    for root in roots(usr, settings):
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root)
            if any(part.startswith(".") for part in relative.parts) or not path.is_file():
                continue
            kind = path.suffix.lower().lstrip(".")
            if kind not in KINDS or path.is_symlink():
                continue
            area = "main" if len(relative.parts) == 1 else relative.parts[0]
            rel = path.relative_to(usr).as_posix()
            found.setdefault(rel, KnowledgeFile(path, rel, area, kind))
    return sorted(found.values(), key=lambda f: f.rel)


def file_digest(path: Path) -> str:
    """SHA-256 of the file's bytes (change detection)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# reading ----------------------------------------------------------------------------------
def _text(data: bytes) -> str:
    """Bytes as text: UTF-8 (a BOM is dropped), UTF-16 with its BOM, else Windows-1252."""
    encoding = "utf-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


_HIDDEN = ("script", "style", "head", "template", "noscript")


def _html_text(html: str) -> str:
    joined = visible_text(html, _HIDDEN)
    lines = (re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in joined.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _pdf_pages(data: bytes) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError:  # pragma: no cover - pypdf is in requirements.txt
        raise KnowledgeFileError(
            "reading PDF needs pypdf (pip install -r requirements.txt)"
        ) from None
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise KnowledgeFileError("the PDF is encrypted")
        for number, page in enumerate(reader.pages):
            yield page.extract_text() or "", {"page": number}
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise KnowledgeFileError(f"the PDF cannot be read: {type(exc).__name__}: {exc}") from None


def _csv_rows(text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        reader = csv.DictReader(io.StringIO(text))
        for number, row in enumerate(reader):
            lines = [f"{key}: {value}" for key, value in row.items() if key is not None]
            yield "\n".join(lines), {"row": number}
    except csv.Error as exc:
        raise KnowledgeFileError(f"the CSV cannot be read: {exc}") from None


def pieces(file: KnowledgeFile) -> list[tuple[str, dict[str, Any]]]:
    """The file's text as (text, loader metadata) pieces, before chunking."""
    try:
        if file.path.stat().st_size > MAX_FILE_BYTES:
            raise KnowledgeFileError(f"the file is larger than {MAX_FILE_BYTES} bytes")
        data = file.path.read_bytes()
    except OSError as exc:
        raise KnowledgeFileError(f"the file cannot be read: {exc.strerror or exc}") from None
    if file.kind == "pdf":
        return list(_pdf_pages(data))
    text = _text(data)
    if file.kind == "csv":
        return list(_csv_rows(text))
    if file.kind in ("html", "htm"):
        return [(_html_text(text), {})]
    return [(text, {})]


def split(text: str, size: int = CHUNK_CHARS, overlap: int = CHUNK_OVERLAP) -> list[str]:
    """Cut ``text`` in chunks of at most ``size`` characters, each starting up to
    ``overlap`` characters before the previous one ended, preferably at a paragraph, line
    or word boundary."""
    text = text.strip()
    if not text:
        return []
    chunks: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            window = text[start:end]
            for separator in ("\n\n", "\n", ". ", " "):
                cut = window.rfind(separator)
                if cut > size // 2:
                    end = start + cut + len(separator)
                    break
        chunk = text[start:end].strip()
        if chunk:
            chunks.append(chunk)
        if end >= len(text):
            break
        start = max(start + 1, end - overlap)
    return chunks


def chunks_of(file: KnowledgeFile) -> list[tuple[str, dict[str, Any]]]:
    """The file's chunks with upstream's knowledge metadata."""
    base = {
        "knowledge_source": True,
        "source_file": file.path.name,
        "source_path": f"usr/{file.rel}",
        "file_type": file.kind,
        "import_timestamp": None,
    }
    found = []
    for text, extra in pieces(file):
        for index, chunk in enumerate(split(text)):
            found.append((chunk, {**base, **extra, "chunk": index}))
    return found


def safe_upload_name(name: str) -> str:
    """An uploaded file's name made safe to store (no folders, no dot-file)."""
    base = Path(name.replace("\\", "/")).name
    cleaned = re.sub(r"[^A-Za-z0-9._ -]", "_", base).strip(" .")
    return cleaned[:200] or "upload.txt"
