"""Callback links: a signed token that names one callback, and the URL a person opens.

A link is ``{callback_url}/cb/{token}``. The token binds the task id and the callback's token
with an HMAC-SHA256 made with the app's first signing key; a token that any of the keys
verifies is accepted, so keys rotate as continuation messages' do. It is never a bare id: a
changed byte makes it refused before anything is read. The MAC covers a purpose prefix, so a
continuation's signature is never a link's. A link holds nothing else, the time least of all:
a callback's link is the same in every run of the turn that made it (``check_replay_safe``
compares a submitter's ``url``), and the endpoint reads the callback's timeout from its record.
Links made before carried an expiry (``"e"``), which still holds for them.

Example:
    >>> links = CallbackLinks("https://example.test/", ("k1",))
    >>> url = links.url("t-1", "a" * 32)
    >>> url.startswith("https://example.test/cb/")
    True
    >>> claim = read_token(url.rpartition("/")[2], ("k1",))
    >>> (claim.task_id, claim.token, claim.expires_at)
    ('t-1', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', None)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import os
import string
from typing import NamedTuple

from continuum.errors import ConfigurationError

#: Where a deployed stack tells its functions the link endpoint's base URL.
CALLBACK_URL_ENV = "CONTINUUM_CALLBACK_URL"
#: The path of a link under the endpoint's base URL.
LINK_PATH = "/cb/"
#: What the MAC covers before the payload: a link's signature is good for nothing else.
_PURPOSE = b"continuum.callback-link.v1\n"
_VERSION = "v1"
_B64_CHARS = frozenset(string.ascii_letters + string.digits + "-_")
#: A longer token is refused unread (task ids are at most a few hundred characters).
MAX_TOKEN_CHARS = 2048


def environment_url() -> str | None:
    """The link endpoint's base URL that the environment gives (None: none)."""
    return os.environ.get(CALLBACK_URL_ENV) or None


class BadLinkToken(ValueError):
    """A link token that is malformed or that no signing key verifies."""


class LinkClaim(NamedTuple):
    """What a verified link token names: a task's callback, and until when it may answer."""

    task_id: str
    token: str
    #: epoch seconds after which the link is dead (None: as its callback's record says; only
    #: links made by earlier versions carry one).
    expires_at: int | None = None

    @property
    def callback_id(self) -> str:
        return f"{self.task_id}.{self.token}"

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


class CallbackLinks(NamedTuple):
    """The link endpoint's base URL and the keys that sign its tokens (the first signs)."""

    base_url: str
    keys: tuple[str, ...]

    def url(self, task_id: str, token: str) -> str:
        """The link of callback ``task_id.token`` (it answers until the callback's timeout).

        Raises:
            ConfigurationError: there is no signing key (a link must be signed).
        """
        if not self.keys:
            raise ConfigurationError(
                f"callback links need a signing key, and {CALLBACK_URL_ENV} is set without one",
                hint="set CONTINUUM_SIGNING_KEY (or its SSM parameter or secret), or unset "
                f"{CALLBACK_URL_ENV} to answer callbacks by id only",
            )
        return self.base_url.rstrip("/") + LINK_PATH + make_token(self.keys[0], task_id, token)


def make_token(key: str, task_id: str, token: str, *, expires_at: float | None = None) -> str:
    """A link token for callback ``task_id.token``, signed with ``key``; ``expires_at`` makes
    one as earlier versions did, with its expiry inside."""
    fields: dict[str, object] = {"t": task_id, "c": token}
    if expires_at is not None:
        fields["e"] = math.ceil(expires_at)
    payload = json.dumps(fields, separators=(",", ":"))
    body = _b64(payload.encode())
    return f"{_VERSION}.{body}.{_b64(_mac(key, body))}"


def read_token(text: str, keys: tuple[str, ...]) -> LinkClaim:
    """The claim of a link token that one of ``keys`` verifies.

    Raises:
        BadLinkToken: malformed, or no key verifies it (nothing of it is trusted then).
    """
    parts = text.split(".") if len(text) <= MAX_TOKEN_CHARS else []
    if len(parts) != 3 or parts[0] != _VERSION or not keys:
        raise BadLinkToken("not a callback link")
    _, body, mac = parts
    try:
        given = _unb64(mac)
    except ValueError:
        raise BadLinkToken("not a callback link") from None
    if _b64(given) != mac:  # base64's unused low bits: one MAC, one spelling
        raise BadLinkToken("not a callback link")
    if not any(hmac.compare_digest(given, _mac(key, body)) for key in keys):
        raise BadLinkToken("no signing key verifies this link")
    fields = json.loads(_unb64(body))  # signed by us: well formed
    return LinkClaim(task_id=fields["t"], token=fields["c"], expires_at=fields.get("e"))


def _mac(key: str, body: str) -> bytes:
    return hmac.new(key.encode(), _PURPOSE + body.encode(), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    if not text or not set(text) <= _B64_CHARS:
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
