"""document_query in the real server: a run killed (SIGKILL) in the middle of a
document_query is replayed after the restart, never held, and the model is not asked again
for what the journal committed; a URL on 127.0.0.1 is read when the setting allows it."""

from __future__ import annotations

import pytest

from tests.integration._durable_system import crashable
from tests.integration._helpers import request_text
from tests.support.document_server import DocumentServer, make_pdf
from tests.unit.test_document_query import HTML, NEEDLE, _pages

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture

QUESTION = "What is the launch code of project Aurora?"
KEYWORDS = "zebra launch code project Aurora"


def _embed_env(model_server) -> dict[str, str]:
    return {
        "A0_SET_embed_model_provider": "other",
        "A0_SET_embed_model_name": "scripted-embedding",
        "A0_SET_embed_model_api_base": model_server.url,
        # with an embedding model, recall and memorize would embed and ask too (docs/memory.md)
        "A0_SET_memory_recall_enabled": "false",
        "A0_SET_memory_memorize_enabled": "false",
    }


@pytest.mark.parametrize("boundary", ["after_intent", "after_result"])
def test_crash_inside_document_query_replays_without_a_hold(crashable, model_server, boundary):
    workdir = crashable.usr / "workdir"
    workdir.mkdir(parents=True)
    make_pdf(workdir / "aurora.pdf", _pages())
    model_server.tool("document_query", {"document": "aurora.pdf", "queries": [QUESTION]})
    model_server.reply(KEYWORDS)
    model_server.reply(f"#### {QUESTION}\nIt is 4417-KILO.")
    model_server.tool("response", {"text": "4417-KILO"})
    env = _embed_env(model_server)
    crash = {"A0_CRASH_AT": boundary, "A0_CRASH_MATCH": "embedding"}
    crashable.crash_during("read aurora.pdf", "doc-1", **crash, **env)
    assert model_server.calls == 2  # the turn's first reply and the utility model's keywords
    chunk_requests = len(model_server.embedding_requests)
    assert chunk_requests == (1 if boundary == "after_result" else 0)

    crashable.start(**env)
    run = crashable.only_run()
    done = crashable.wait_status(run["run_id"], "completed")
    assert model_server.calls == 4  # nothing committed was asked again: answer + response
    assert NEEDLE in request_text(model_server.requests[2])
    texts = model_server.embedded_texts
    assert sum(NEEDLE in t for t in texts) == 1  # the chunks were embedded exactly once
    assert texts[-1] == KEYWORDS
    calls = done["calls"]
    tool = [c for c in calls if c["name"] == "document_query"]
    assert [(c["replay_policy"], c["committed"]) for c in tool] == [("safe_replay", True)]
    embeddings = [c for c in calls if c["name"] == "embedding"]
    assert [(c["replay_policy"], c["committed"]) for c in embeddings] == [
        ("safe_replay", True),
        ("safe_replay", True),
    ]
    assert not any(r.get("status") == "needs_attention" for r in crashable.runs())
    crashable.stop()


def test_html_page_on_loopback_through_the_server(crashable, model_server):
    with DocumentServer() as docs:
        docs.pages["/notes.html"] = ("text/html", HTML)
        url = docs.url + "/notes.html"
        model_server.tool("document_query", {"document": url})
        model_server.tool("response", {"text": "done"})
        crashable.start(A0_SET_document_query_allow_private_addresses="true")
        crashable.server.api_message("read it", input_id="html-1")
        crashable.stop()
        assert docs.paths == ["/notes.html"]
    assert "heron release ships the durable journal" in request_text(model_server.requests[1])

    model_server.tool("document_query", {"document": url})
    model_server.tool("response", {"text": "refused"})
    crashable.start()  # the setting is off by default: 127.0.0.1 is refused
    crashable.server.api_message("read it again", input_id="html-2")
    crashable.stop()
    assert "[document_address_refused]" in request_text(model_server.requests[3])
