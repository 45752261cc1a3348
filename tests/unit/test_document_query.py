"""document_query through real turns: a PDF made here, the scripted model (chat, utility and
/v1/embeddings) and a real HTTP server on 127.0.0.1 for URLs."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from agent import UserMessage
from python.helpers import documents, url_fetch
from python.helpers.document_search import relevance, split_text
from tests.support.document_server import DocumentServer, make_pdf
from tests.support.model_server import model_server as model_server
from tests.unit.test_agent_loop import TIMEOUT, _prompt_text, make_context, workdir

pytestmark = pytest.mark.unit

__all__ = ["make_context", "model_server", "workdir"]

FILLER = (
    "Quarterly maintenance notes for the {n} warehouse describe pallets, forklifts, "
    "loading bays and inventory counts in great and tedious detail. "
)
NEEDLE = "The zebra launch code of project Aurora is 4417-KILO and it rotates every March."
HTML = (
    b"<html><head><title>T</title><script>var hidden = 1;</script></head><body>"
    b"<nav>menu</nav><article><h1>Release notes</h1><p>The heron release ships the durable "
    b"journal with receipts for every shell command.</p><p>It also adds document queries "
    b"for PDF and HTML pages.</p></article></body></html>"
)


def _embed_settings(model_server) -> dict:
    return {
        "embed_model_provider": "other",
        "embed_model_name": "scripted-embedding",
        "embed_model_api_base": model_server.url,
        # with an embedding model, recall and memorize would ask the model too (docs/memory.md)
        "memory_recall_enabled": False,
        "memory_memorize_enabled": False,
    }


def _pages() -> list[str]:
    words = ["north", "south", "east", "west", "river", "harbour", "valley", "summit"]
    pages = [(FILLER.format(n=w) * 8).strip() for w in words]
    pages.insert(5, NEEDLE)
    return pages


async def _run(ctx, text: str) -> str:
    return await asyncio.wait_for(ctx.communicate(UserMessage(text)), TIMEOUT)


def _tool_results(ctx) -> list[str]:
    return [m["content"] for m in ctx.agent0.history.output() if "[tool result" in m["content"]]


# the parts ----------------------------------------------------------------------------------
def test_split_text_windows_overlap_and_cover_the_text():
    text = " ".join(f"word{i}" for i in range(2000))
    pieces = split_text(text)
    assert all(len(p) <= 1000 for p in pieces) and len(pieces) > 10
    assert pieces[0].startswith("word0 ") and pieces[-1].endswith("word1999")
    for left, right in itertools.pairwise(pieces):
        assert right.split()[0] in left  # each window starts inside the previous one
    assert split_text("short") == ["short"] and split_text("  ") == []


def test_relevance_is_upstreams_scale():
    assert relevance([1, 0], [1, 0]) == 1.0
    assert relevance([1, 0], [-1, 0]) == 0.0
    assert relevance([1, 0], [0, 1]) == 0.5


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "172.16.0.9",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "fd00::1",
        "100.64.0.1",
        "0.0.0.0",
        "::ffff:127.0.0.1",
        "224.0.0.1",
    ],
)
def test_addresses_that_are_not_public(address):
    assert url_fetch.is_public(address) is False


def test_public_addresses():
    assert url_fetch.is_public("93.184.215.14") and url_fetch.is_public("2606:4700::1111")


@pytest.mark.parametrize(
    "url, words",
    [
        ("file:///etc/passwd", "only http"),
        ("ftp://example.org/x", "only http"),
        ("http://user:pw@example.org/", "no credentials"),
        ("http:///nohost", "names no host"),
    ],
)
def test_refused_urls(url, words):
    with pytest.raises(url_fetch.FetchError) as caught:
        url_fetch.check_scheme(url)
    assert caught.value.code == "document_url_refused" and words in caught.value.message


def test_loader_kinds_and_html_fallback():
    assert documents.kind_of("a/b.PDF") == "pdf"
    assert documents.kind_of("https://x.org/page", "text/html") == "html"
    assert documents.kind_of("data.csv") == "text" and documents.kind_of("x.json") == "text"
    assert documents.kind_of("x.docx") == "docx"
    assert documents.kind_of("https://x.org/blob", "image/png").startswith("unsupported")
    text = documents.html_text_fallback(HTML.decode())
    assert "heron release" in text and "hidden" not in text and "Release notes" in text


def test_office_files_without_the_extra_say_how_to_install_it(monkeypatch):
    monkeypatch.setattr(documents, "_optional", lambda name: None)
    with pytest.raises(documents.DocumentError) as caught:
        documents.to_text(b"PK", "docx", "report.docx")
    assert caught.value.code == "document_unsupported"
    assert "requirements-documents.txt" in caught.value.message


# through a turn --------------------------------------------------------------------------
async def test_pdf_query_sends_the_matching_chunk_to_the_model(model_server, make_context, workdir):
    workdir.mkdir(parents=True, exist_ok=True)
    make_pdf(workdir / "aurora.pdf", _pages())
    question = "What is the launch code of project Aurora?"
    model_server.tool("document_query", {"document": "aurora.pdf", "queries": [question]})
    model_server.reply("zebra launch code project Aurora")  # the utility model's keywords
    model_server.reply(f"#### {question}\nIt is 4417-KILO.")  # the chat model's answer
    model_server.tool("response", {"text": "4417-KILO"})
    ctx = make_context(**_embed_settings(model_server))
    assert await _run(ctx, "read the report") == "4417-KILO"

    assert model_server.calls == 4
    keywords, answer = model_server.requests[1], model_server.requests[2]
    assert question in _prompt_text(keywords)
    sent = _prompt_text(answer)
    assert "4417-KILO" in sent and question in sent
    passages = sent.split("[aurora.pdf, passage ")
    assert 2 <= len(passages) <= 7  # a handful of the best passages, not the whole PDF
    assert "4417-KILO" in passages[1]  # the matching chunk ranks first
    embedded = model_server.embedded_texts
    assert any(NEEDLE in t for t in embedded) and "zebra launch code project Aurora" in embedded
    assert "It is 4417-KILO." in _tool_results(ctx)[0]

    # a second question on the same PDF: the chunks come from the embedding cache
    before = len(model_server.embedded_texts)
    model_server.tool("document_query", {"document": "aurora.pdf", "query": "When does it rotate?"})
    model_server.reply("rotation month")
    model_server.reply("#### When does it rotate?\nEvery March.")
    model_server.tool("response", {"text": "March"})
    assert await _run(ctx, "and when?") == "March"
    assert model_server.embedded_texts[before:] == ["rotation month"]


async def test_bad_documents_are_tool_errors_the_agent_reads(model_server, make_context, workdir):
    workdir.mkdir(parents=True, exist_ok=True)
    make_pdf(workdir / "locked.pdf", ["secret plans"], user_password="pw")
    (workdir / "broken.pdf").write_bytes(b"%PDF-1.7\nnot really a pdf")
    (workdir / "big.txt").write_text("x" * 5000)
    cases = [
        ({"document": "locked.pdf"}, "[document_encrypted]"),
        ({"document": "broken.pdf"}, "[document_unreadable]"),
        ({"document": "missing.pdf"}, "[document_not_found]"),
        ({"document": "big.txt"}, "[document_too_large]"),
        ({"document": "/etc/hostname"}, "[document_path_refused]"),
        ({"document": "gopher://example.org/"}, "[document_url_refused]"),
        ({}, "needs a 'document'"),
    ]
    for args, _ in cases:
        model_server.tool("document_query", args)
    model_server.tool("response", {"text": "coped"})
    ctx = make_context(document_query_max_bytes=4096, **_embed_settings(model_server))
    assert await _run(ctx, "read them") == "coped"
    results = _tool_results(ctx)
    for (args, expected), text in zip(cases, results, strict=True):
        assert expected in text, (args, text)
    assert "Traceback" not in "".join(results)


async def test_url_on_loopback_is_read_when_allowed(model_server, make_context):
    with DocumentServer() as docs:
        docs.pages["/notes.html"] = ("text/html; charset=utf-8", HTML)
        docs.redirects["/old"] = "/notes.html"
        model_server.tool("document_query", {"document": docs.url + "/old"})
        model_server.tool("response", {"text": "read"})
        ctx = make_context(document_query_allow_private_addresses=True)
        assert await _run(ctx, "read the page") == "read"
        assert docs.paths == ["/old", "/notes.html"]
        second = docs.requests[1][1]
        assert "cookie" not in second and "authorization" not in second  # nothing sent on
    text = _tool_results(ctx)[0]
    assert "heron release ships the durable journal" in text and "hidden" not in text


async def test_private_address_is_refused_with_the_setting_off(model_server, make_context):
    with DocumentServer() as docs:
        docs.pages["/notes.html"] = ("text/html", HTML)
        model_server.tool("document_query", {"document": docs.url + "/notes.html"})
        model_server.tool("response", {"text": "refused"})
        ctx = make_context()  # document_query_allow_private_addresses: off by default
        assert await _run(ctx, "read the page") == "refused"
        assert docs.requests == []  # never connected
    text = _tool_results(ctx)[0]
    assert "[document_address_refused]" in text and "127.0.0.1" in text
    assert "document_query_allow_private_addresses" in text


async def test_redirect_to_a_private_address_is_refused(monkeypatch):
    """The first hop is "public" (127.0.0.1 counts as public for this test only); the
    redirect points at 127.0.0.2, which does not: the second hop is never made."""
    monkeypatch.setattr(url_fetch, "is_public", lambda address: address == "127.0.0.1")
    with DocumentServer() as docs:
        docs.redirects["/go"] = "http://127.0.0.2:9/inside"
        with pytest.raises(url_fetch.FetchError) as caught:
            await url_fetch.fetch(docs.url + "/go", max_bytes=10_000, timeout=20)
    assert caught.value.code == "document_address_refused" and "127.0.0.2" in caught.value.message
    assert docs.paths == ["/go"]


async def test_url_limits_size_and_time():
    with DocumentServer() as docs:
        docs.pages["/big.txt"] = ("text/plain", b"y" * 50_000)
        docs.pages["/slow.txt"] = ("text/plain", b"late")
        docs.delays["/slow.txt"] = 30.0
        with pytest.raises(url_fetch.FetchError) as big:
            await url_fetch.fetch(
                docs.url + "/big.txt", allow_private=True, max_bytes=1000, timeout=20
            )
        with pytest.raises(url_fetch.FetchError) as slow:
            await url_fetch.fetch(
                docs.url + "/slow.txt", allow_private=True, max_bytes=1000, timeout=0.5
            )
    assert big.value.code == "document_too_large"
    assert slow.value.code == "document_timeout" and "document_query_timeout" in slow.value.message
