"""The HTTP(S) client of admission and conversion hooks: one POST of a JSON review, one JSON reply.

Guarantees: a call takes at most its timeout (default `DEFAULT_TIMEOUT`, a definition may set up to
`MAX_TIMEOUT`); a reply larger than `MAX_REPLY_BYTES`, not HTTP 200, not JSON or not a JSON object is a
`HookFailed`, as is every transport error; https is verified against the system's trust store or the hook's own
CA bundle; plain http is accepted (by `url_problem`) on loopback addresses only.
"""

from __future__ import annotations

import ipaddress
import json
import ssl
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from caravanserai.text.violations import quote

DEFAULT_TIMEOUT = 10.0
MAX_TIMEOUT = 30.0
MAX_REPLY_BYTES = 4 << 20


class HookFailed(Exception):
    """A hook could not be called or answered badly (the failure policy decides what follows)."""


def url_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return f"{quote(url)} must be an https:// URL (or http:// on a loopback address)"
    if parts.scheme == "http" and not _loopback(parts.hostname):
        return f"{quote(url)}: plain http is allowed on a loopback address only; use https"
    return None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def post_review(url: str, review: dict[str, Any], *, timeout: float, ca_bundle: str) -> dict[str, Any]:
    """POST `review` as JSON to `url` and return the reply's object (its "response" member when it has one);
    HookFailed when the call fails, takes longer than `timeout` s (0: the default), answers other than 200 or with
    something else than a JSON object. `ca_bundle`: PEM to trust instead of the system's store."""
    seconds = timeout or DEFAULT_TIMEOUT
    tls: ssl.SSLContext | bool = ssl.create_default_context(cadata=ca_bundle) if ca_bundle else True
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds)) as session,
            session.post(url, json=review, ssl=tls) as response,
        ):
            if response.status != 200:
                raise HookFailed(f"answered HTTP {response.status}")
            raw = await response.content.read(MAX_REPLY_BYTES + 1)
            if len(raw) > MAX_REPLY_BYTES:
                raise HookFailed(f"the reply is larger than {MAX_REPLY_BYTES} bytes")
            try:
                body = json.loads(raw)
            except ValueError:
                raise HookFailed("the reply is not JSON") from None
    except TimeoutError:
        raise HookFailed(f"no answer within {seconds:g} s") from None
    except (aiohttp.ClientError, ValueError) as exc:
        raise HookFailed(str(exc) or type(exc).__name__) from None
    reply = body.get("response", body) if isinstance(body, dict) else None
    if not isinstance(reply, dict):
        raise HookFailed("the reply is not a JSON object")
    return reply


__all__ = ["DEFAULT_TIMEOUT", "MAX_REPLY_BYTES", "MAX_TIMEOUT", "HookFailed", "post_review", "url_problem"]
