"""One guarded GET of an http(s) URL, for the document_query tool (docs/documents.md).

What it promises, so that fetching stays a read the journal may replay:

- Only ``GET``, only ``http`` and ``https``; no cookies, no credentials (a URL with a user
  name or password is refused, ``trust_env=False`` so no ``.netrc`` or proxy from the
  environment), a fresh client per hop so a cookie set by one answer is never sent on.
- Every address the host name resolves to must be public (not loopback, link-local,
  private, shared, reserved, multicast or unspecified) unless ``allow_private``; the
  connection then goes to one of the checked addresses (the name is not resolved a second
  time, so a DNS answer cannot change between the check and the connection), with the
  original name as ``Host`` and as the TLS server name (certificates are still verified).
- Redirects are followed by hand (at most ``MAX_REDIRECTS``), each hop checked again.
- At most ``max_bytes`` of (decoded) body and ``timeout`` seconds for the whole fetch.

Every refusal or failure is a ``FetchError`` with a stable ``code``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from python.helpers.errors import CodeError

MAX_REDIRECTS = 5
USER_AGENT = "agent-zero-durable document_query"
_REDIRECTS = {301, 302, 303, 307, 308}


class FetchError(CodeError):
    """A URL that could not be fetched; ``code`` is stable, the message says what to do."""


@dataclass(frozen=True)
class Fetched:
    url: str  # the final URL, after redirects
    content_type: str  # the media type without parameters, lower case ("" if none)
    charset: str | None
    body: bytes


def check_scheme(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL without credentials, else FetchError."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise FetchError("document_url_refused", f"'{url}' is not a valid URL ({exc}).") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise FetchError(
            "document_url_refused",
            f"'{url}': only http:// and https:// URLs are fetched (not '{scheme or 'none'}').",
        )
    if parts.username is not None or parts.password is not None:
        raise FetchError(
            "document_url_refused",
            "URLs with a user name or password are refused: no credentials are ever sent.",
        )
    if not parts.hostname:
        raise FetchError("document_url_refused", f"'{url}' names no host.")
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80)


def is_public(address: str) -> bool:
    """True for an address on the public internet (IPv4-mapped IPv6 judged as IPv4)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return bool(ip.is_global) and not ip.is_multicast


async def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (a literal address resolves to itself)."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise FetchError(
            "document_fetch_failed", f"the host name '{host}' does not resolve ({exc})."
        ) from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise FetchError("document_fetch_failed", f"the host name '{host}' has no address.")
    return addresses


async def checked_address(host: str, port: int, allow_private: bool) -> str:
    """The address to connect to: every resolved address must be public unless allowed."""
    addresses = await resolve(host, port)
    if not allow_private:
        refused = [a for a in addresses if not is_public(a)]
        if refused:
            raise FetchError(
                "document_address_refused",
                f"'{host}' resolves to an address that is not public ({', '.join(refused)}); "
                "loopback, link-local and private addresses are refused unless the setting "
                "document_query_allow_private_addresses is on.",
            )
    return addresses[0]


def _pinned_url(url: str, address: str) -> str:
    """``url`` with its host replaced by ``address`` (the connection goes there)."""
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))


def _host_header(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return host if parts.port is None else f"{host}:{parts.port}"


async def _one_hop(
    url: str, allow_private: bool, max_bytes: int, verify: ssl.SSLContext | bool
) -> tuple[int, httpx.Headers, bytes]:
    scheme, host, port = check_scheme(url)
    address = await checked_address(host, port, allow_private)
    headers = {"Host": _host_header(url), "User-Agent": USER_AGENT, "Accept": "*/*"}
    extensions = {"sni_hostname": host} if scheme == "https" else {}
    async with httpx.AsyncClient(trust_env=False, follow_redirects=False, verify=verify) as client:
        request = client.build_request(
            "GET", _pinned_url(url, address), headers=headers, extensions=extensions
        )
        response = await client.send(request, stream=True)
        try:
            if response.status_code in _REDIRECTS:
                return response.status_code, response.headers, b""
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > max_bytes:
                raise _too_large(url, max_bytes)
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body.extend(chunk)
                if len(body) > max_bytes:
                    raise _too_large(url, max_bytes)
            return response.status_code, response.headers, bytes(body)
        finally:
            await response.aclose()


def _too_large(url: str, max_bytes: int) -> FetchError:
    return FetchError(
        "document_too_large",
        f"{url} is larger than {max_bytes} bytes (setting document_query_max_bytes).",
    )


async def _follow(
    url: str, allow_private: bool, max_bytes: int, verify: ssl.SSLContext | bool
) -> Fetched:
    for _ in range(MAX_REDIRECTS + 1):
        status, headers, body = await _one_hop(url, allow_private, max_bytes, verify)
        if status in _REDIRECTS:
            location = headers.get("location")
            if not location:
                raise FetchError("document_fetch_failed", f"{url} redirects without a Location.")
            url = urljoin(url, location)
            continue
        if status >= 400:
            raise FetchError("document_fetch_failed", f"{url} answered HTTP {status}.")
        media, _, params = headers.get("content-type", "").partition(";")
        charset = None
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.lower() == "charset" and value:
                charset = value.strip("\"' ")
        return Fetched(url, media.strip().lower(), charset, body)
    raise FetchError("document_fetch_failed", f"more than {MAX_REDIRECTS} redirects.")


async def fetch(
    url: str,
    *,
    allow_private: bool = False,
    max_bytes: int,
    timeout: float,
    verify: ssl.SSLContext | bool = True,
) -> Fetched:
    """GET ``url`` within the limits above; FetchError on every refusal or failure."""
    try:
        return await asyncio.wait_for(_follow(url, allow_private, max_bytes, verify), timeout)
    except TimeoutError:
        raise FetchError(
            "document_timeout",
            f"{url} did not answer within {timeout:g} seconds (setting document_query_timeout).",
        ) from None
    except httpx.HTTPError as exc:
        reason = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
        raise FetchError(
            "document_fetch_failed", f"{url} could not be fetched ({reason})."
        ) from None
