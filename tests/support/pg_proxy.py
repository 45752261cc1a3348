"""A TCP proxy on 127.0.0.1 between clients and PostgreSQL that can lose a COMMIT's
acknowledgement: the server commits, the client never hears so.

Bytes pass through unchanged. The proxy reads just enough of the wire protocol to act:
from the client, every byte of the current transaction (since the server was last idle,
ReadyForQuery 'I'), to match a marker; from the server, message boundaries (a type byte
and a length), after the one-byte answers to SSL/GSS requests. When armed, the first
CommandComplete 'C' with the tag ``COMMIT`` of a transaction whose client bytes hold the
marker is not forwarded: both sockets are closed instead (the commit happened, its
acknowledgement is lost). ``arm(..., request=True)`` loses the COMMIT itself instead: the
client's ``COMMIT`` (a simple query, or a Parse in pipeline mode) is not forwarded, both
sockets are closed, and the server rolls the transaction back. ``arm(..., then_down=True)``
also cuts every other connection and refuses new ones until ``restore()``: the database is
gone, as far as clients know. ``arm(..., hold=True)`` only delays that acknowledgement:
it is forwarded once ``release()`` is called (the commit is visible to everyone else
meanwhile, while the client still waits for its answer).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

_CHUNK = 65536
#: The simple query ``COMMIT`` as a client sends it: 'Q', length 11, the text, NUL.
_COMMIT_QUERY = b"Q\x00\x00\x00\x0bCOMMIT\x00"
#: ``COMMIT`` in the extended protocol (pipeline mode): Parse 'P', length 14, the unnamed
#: statement, the text, no parameter types.
_COMMIT_PARSE = b"P\x00\x00\x00\x0e\x00COMMIT\x00\x00\x00"


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: PgProxy, client: socket.socket, upstream: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.lock = threading.Lock()
        self.transaction = bytearray()  # client bytes since the server was last idle
        self.closed = False

    def start(self) -> None:
        for target in (self._from_client, self._from_server):
            threading.Thread(target=target, daemon=True).start()

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        for sock in (self.client, self.upstream):
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with suppress(OSError):
                sock.close()

    def _from_client(self) -> None:
        try:
            while True:
                data = self.client.recv(_CHUNK)
                if not data:
                    break
                with self.lock:
                    self.transaction += data  # recorded before the server can answer it
                    seen = bytes(self.transaction)
                commit = _COMMIT_QUERY in data or _COMMIT_PARSE in data
                if commit and self.proxy._take(seen, request=True):
                    self.close()
                    self.proxy._lost_one(self)
                    return
                self.upstream.sendall(data)
        except OSError:
            pass
        self.close()

    def _from_server(self) -> None:
        buf = bytearray()
        started = passthrough = False
        try:
            while True:
                data = self.upstream.recv(_CHUNK)
                if not data:
                    break
                if passthrough:
                    self.client.sendall(data)
                    continue
                buf += data
                out = bytearray()
                while buf:
                    if not started and buf[:1] == b"N":  # no SSL / no GSS encryption
                        out += buf[:1]
                        del buf[:1]
                        continue
                    if not started and buf[:1] == b"S":  # TLS: nothing left to read here
                        passthrough = True
                        out += buf
                        buf.clear()
                        break
                    if len(buf) < 5:
                        break
                    total = 1 + int.from_bytes(buf[1:5], "big")
                    if len(buf) < total:
                        break
                    started = True
                    message = bytes(buf[:total])
                    del buf[:total]
                    if self._lose(message):
                        if out:
                            self.client.sendall(out)
                            out = bytearray()
                        if self.proxy._held_ack():
                            out += message  # released: it goes on as if nothing happened
                            continue
                        self.close()
                        self.proxy._lost_one(self)
                        return
                    out += message
                if out:
                    self.client.sendall(out)
        except OSError:
            pass
        self.close()

    def _lose(self, message: bytes) -> bool:
        """True when this message is the acknowledgement to lose."""
        kind = message[:1]
        if kind == b"Z" and message[5:6] == b"I":
            with self.lock:
                self.transaction.clear()
            return False
        if kind != b"C" or message[5:].rstrip(b"\0") != b"COMMIT":
            return False
        with self.lock:
            seen = bytes(self.transaction)
        return self.proxy._take(seen, request=False)


class PgProxy:
    """``PgProxy(host, port)``: listens on 127.0.0.1 at ``port`` (chosen on start)."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener: socket.socket | None = None
        self._lock = threading.Lock()
        self._links: list[_Link] = []
        self._marker: bytes | None = None
        self._armed = False
        self._request = False
        self._then_down = False
        self._hold = False
        self.held = threading.Event()  # an acknowledgement is held (arm(..., hold=True))
        self._released = threading.Event()
        self.down = False
        self.lost = 0  # acknowledgements lost so far
        self.lost_event = threading.Event()
        self.port = 0

    @classmethod
    def for_dsn(cls, dsn: str) -> PgProxy:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(dsn)
        return cls(str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))

    def dsn(self, dsn: str) -> str:
        """``dsn`` pointed at the proxy (plain TCP: the proxy reads the protocol)."""
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(dsn)
        params.update(host="127.0.0.1", port=str(self.port), sslmode="disable")
        return make_conninfo(**params)  # type: ignore[arg-type]

    def start(self) -> PgProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        self._listener = listener
        self.port = int(listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            link = _Link(self, client, upstream)
            with self._lock:
                self._links = [k for k in self._links if not k.closed] + [link]
            link.start()

    def arm(
        self,
        marker: bytes | None = None,
        *,
        request: bool = False,
        then_down: bool = False,
        hold: bool = False,
    ) -> None:
        """Lose the acknowledgement (with ``request``: the COMMIT itself; with ``hold``:
        delay it until ``release()``) of the next transaction whose client bytes hold
        ``marker`` (any transaction's when None); once."""
        with self._lock:
            self._marker, self._armed = marker, True
            self._request, self._then_down, self._hold = request, then_down, hold
            self.lost_event.clear()
            self.held.clear()
            self._released.clear()

    def _held_ack(self) -> bool:
        """Armed with ``hold``: wait (this link's server side) until ``release()``; True."""
        if not self._hold:
            return False
        self.held.set()
        self._released.wait(120)
        return True

    def release(self) -> None:
        """Forward the acknowledgement held by ``arm(..., hold=True)``."""
        self._released.set()

    def _take(self, seen: bytes, *, request: bool) -> bool:
        with self._lock:
            if not self._armed or self._request != request:
                return False
            if self._marker is not None and self._marker not in seen:
                return False
            self._armed = False
            if self._then_down:
                self.down = True
            return True

    def _lost_one(self, link: _Link) -> None:
        with self._lock:
            self.lost += 1
            cut = list(self._links) if self.down else []
        for other in cut:
            other.close()
        self.lost_event.set()

    def restore(self) -> None:
        """Accept connections again after ``arm(..., then_down=True)``."""
        self.down = False

    def close(self) -> None:
        self._released.set()  # a held acknowledgement goes (to a closed socket)
        if self._listener is not None:
            with suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
            with suppress(OSError):
                self._listener.close()
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()


@contextmanager
def pg_proxy(dsn: str) -> Iterator[PgProxy]:
    """A started proxy in front of the server ``dsn`` names; closed afterwards."""
    proxy = PgProxy.for_dsn(dsn).start()
    try:
        yield proxy
    finally:
        proxy.close()
