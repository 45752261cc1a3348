"""Knowledge folders, loaders and chunking (python/helpers/knowledge.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from python.helpers import knowledge as folders

pytestmark = pytest.mark.unit


def _pdf(text: str) -> bytes:
    """A one-page PDF showing ``text`` (built by hand: objects, xref, trailer)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out


def test_scan_finds_areas_and_skips_what_it_does_not_read(tmp_path: Path):
    usr = tmp_path
    settings = {"agent_knowledge_subdir": "custom"}
    folders.ensure_folders(usr, settings)
    custom = usr / "knowledge" / "custom"
    (custom / "top.md").write_text("a")
    (custom / "solutions" / "deep").mkdir()
    (custom / "solutions" / "deep" / "s.txt").write_text("b")
    (custom / ".hidden.md").write_text("c")
    (custom / "main" / ".git").mkdir()
    (custom / "main" / ".git" / "x.md").write_text("d")
    (custom / "main" / "noext").write_text("e")
    (custom / "main" / "tool.exe").write_text("f")
    (usr / "knowledge" / "default" / "d.json").write_text("{}")
    found = [(f.rel, f.area, f.kind) for f in folders.scan(usr, settings)]
    assert found == [
        ("knowledge/custom/solutions/deep/s.txt", "solutions", "txt"),
        ("knowledge/custom/top.md", "main", "md"),
        ("knowledge/default/d.json", "main", "json"),
    ]
    assert folders.knowledge_subdir({"agent_knowledge_subdir": "../etc"}) == "custom"


def test_pdf_csv_html_and_text_are_read(tmp_path: Path):
    def file(name: str, data: bytes) -> folders.KnowledgeFile:
        path = tmp_path / name
        path.write_bytes(data)
        return folders.KnowledgeFile(path, name, "main", path.suffix.lstrip("."))

    assert folders.chunks_of(file("a.pdf", _pdf("Hello PDF knowledge")))[0][0] == (
        "Hello PDF knowledge"
    )
    assert folders.chunks_of(file("a.pdf", _pdf("x")))[0][1]["page"] == 0
    rows = folders.chunks_of(file("a.csv", b"name,city\nAda,London\n"))
    assert rows == [
        (
            "name: Ada\ncity: London",
            {
                "knowledge_source": True,
                "source_file": "a.csv",
                "source_path": "usr/a.csv",
                "file_type": "csv",
                "import_timestamp": None,
                "row": 0,
                "chunk": 0,
            },
        )
    ]
    html = b"<html><style>p{}</style><body><h1>Title</h1><p>Body &amp; more</p></body></html>"
    assert folders.chunks_of(file("a.html", html))[0][0] == "Title\n\nBody & more"
    assert folders.chunks_of(file("a.txt", "caf\u00e9".encode("cp1252")))[0][0] == "caf\u00e9"
    with pytest.raises(folders.KnowledgeFileError):
        folders.chunks_of(file("bad.pdf", b"%PDF-1.4 nothing else"))


def test_split_keeps_chunks_under_the_size_with_overlap():
    text = " ".join(f"word{i}" for i in range(3000))
    chunks = folders.split(text, size=1000, overlap=100)
    assert all(len(c) <= 1000 for c in chunks) and len(chunks) > 15
    assert chunks[1].split()[0] in chunks[0]  # the next chunk starts inside the previous one
    assert folders.split("   ") == []
    assert folders.safe_upload_name("../../etc/pass wd.md") == "pass wd.md"
    assert folders.safe_upload_name("..") == "upload.txt"
