"""document_query: read documents (files or http(s) URLs) and answer questions about them.

Replay class (durability/replay.py pins this file's SHA-256): it only reads. A local file
is read, a URL is fetched with one guarded GET (python/helpers/url_fetch.py: no cookies, no
credentials, public addresses only unless ``document_query_allow_private_addresses``); the
model calls it makes (the utility model's search keywords, the embedding requests, the
chat model's answer) are journaled calls of their own, so a replay after a crash reuses
every one already committed and asks only for the rest. Keep it that way: any change to
this file needs a review of that claim and a new pin.

Upstream's shape: ``document`` (one source or a list), ``queries`` (a list; ``query`` is
accepted too). Without questions the documents' text is returned. Bad input never raises:
the result text names the problem and its code (docs/documents.md).
"""

from __future__ import annotations

from typing import Any

from python.helpers import document_search, documents
from python.helpers.document_search import Chunk
from python.helpers.models import ModelError
from python.helpers.tool import Response, Tool

HITS_PER_QUERY = 6
MAX_CHUNKS = 5000
MAX_FULL_TEXT_CHARS = 200_000
MAX_SOURCES = 10
MAX_QUERIES = 10


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if str(v).strip()]
    return []


def _error(text: str) -> Response:
    return Response(f"document_query: {text}", break_loop=False)


class DocumentQuery(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        sources = _strings(self.args.get("document", self.args.get("documents")))
        queries = _strings(self.args.get("queries")) or _strings(self.args.get("query"))
        if not sources:
            return _error("needs a 'document': a path in the work folder or an http(s) URL.")
        if len(sources) > MAX_SOURCES or len(queries) > MAX_QUERIES:
            return _error(f"at most {MAX_SOURCES} documents and {MAX_QUERIES} queries a call.")
        settings = self.agent.config.settings
        limits = documents.Limits.from_settings(settings)
        workdir = self.agent.config.workdir_path()
        loaded: list[documents.Document] = []
        problems: list[str] = []
        for source in sources:
            try:
                doc = await documents.load(source, workdir, limits)
            except documents.DocumentError as exc:
                problems.append(f"[{exc.code}] {exc.message}")
                continue
            # the model sees §§secret(NAME), never a secret the document holds
            loaded.append(documents.Document(doc.source, doc.kind, self.agent.mask(doc.text)))
        if not loaded:
            return _error("no document could be read:\n" + "\n".join(problems))
        if not queries:
            return Response(self._with_problems(self._full_text(loaded), problems), False)
        try:
            answer = await self._answer(loaded, queries)
        except ModelError as exc:
            return _error(f"[model_error] the embedding model failed: {exc.message}")
        return Response(self._with_problems(answer, problems), break_loop=False)

    @staticmethod
    def _with_problems(text: str, problems: list[str]) -> str:
        if not problems:
            return text
        return text + "\n\n(Not read: " + "; ".join(problems) + ")"

    @staticmethod
    def _full_text(loaded: list[documents.Document]) -> str:
        text = "\n\n---\n\n".join(f"# {d.source}\n\n{d.text}" for d in loaded)
        if len(text) > MAX_FULL_TEXT_CHARS:
            text = text[:MAX_FULL_TEXT_CHARS] + (
                f"\n\n[cut at {MAX_FULL_TEXT_CHARS} characters: ask questions ('queries') "
                "to search the whole document]"
            )
        return text

    async def _keywords(self, query: str) -> str:
        """The utility model's search keywords for a question (the question itself when it
        fails or answers nothing useful)."""
        system = self.agent.read_prompt("fw.document_query.optmimize_query.md")
        try:
            words = (await self.agent.call_utility_model(system, query)).strip()
        except ModelError:
            return query
        return words if len(words) > 3 else query

    async def _answer(self, loaded: list[documents.Document], queries: list[str]) -> str:
        chunks = [
            Chunk(d.source, i, piece)
            for d in loaded
            for i, piece in enumerate(document_search.split_text(d.text))
        ]
        if len(chunks) > MAX_CHUNKS:
            return (
                f"document_query: [document_too_large] the documents make {len(chunks)} "
                f"passages, more than {MAX_CHUNKS}; query fewer or smaller documents."
            )
        keywords = [await self._keywords(q) for q in queries]
        model = document_search.embedding_model(self.agent)
        vectors = await document_search.embed(self.agent, model, [c.text for c in chunks])
        query_vectors = await document_search.embed(self.agent, model, keywords)
        found: dict[tuple[str, int], tuple[float, Chunk]] = {}
        for vector in query_vectors:
            for score, chunk in document_search.rank(vector, chunks, vectors, HITS_PER_QUERY):
                key = (chunk.source, chunk.index)
                if key not in found or found[key][0] < score:
                    found[key] = (score, chunk)
        if not found:
            names = ", ".join(d.source for d in loaded)
            return f"!!! Nothing in {names} matched the queries: " + "; ".join(queries)
        best = sorted(found.values(), key=lambda hit: -hit[0])
        passages = "\n\n".join(
            f"[{chunk.source}, passage {chunk.index + 1}]\n{chunk.text}" for _, chunk in best
        )
        questions = "\n".join(f"- {q}" for q in queries)
        messages = [
            {
                "role": "system",
                "content": self.agent.read_prompt("fw.document_query.system_prompt.md"),
            },
            {"role": "user", "content": f"Passages:\n\n{passages}\n\nQuestions:\n{questions}"},
        ]
        return (await self.agent.call_model(messages, kind="chat")).response
