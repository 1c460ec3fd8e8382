"""The guard in front of the dev stack's moto server: only the SDKs on this machine get through.

moto answers any request: a page of another site, open in the browser on the same machine,
could list the dev stack's tasks (``/moto-api/data.json``, with CORS headers for the caller)
and write any object with a POST that needs no preflight (an S3 POST-policy upload, a
``text/plain`` DeleteObjects). The guard refuses, with ``403`` and no CORS headers:

- a request with an ``Origin`` header or any ``Sec-Fetch-*`` header: browsers send them, and
  boto3, the AWS CLI and the other SDKs never do;
- a ``Host`` that is not this server's loopback name and port (a DNS-rebinding page's requests
  name its own host);
- ``/moto-api``, moto's own pages and state dump, which nothing of continuum uses;
- a request that is not signed: by Signature Version 4 in its ``Authorization`` header or
  query, or by a presigned URL's Signature Version 2 query (boto3's S3 default). Every SDK
  call is signed; a browser form or ``fetch`` cannot add that header without a preflight,
  which carries an ``Origin``.

moto does not verify signatures, so the last rule refuses what is unsigned, not what is
forged; the first three are what keep a browser page out.

Example:
    >>> server = GuardedMotoServer("127.0.0.1", 0)  # doctest: +SKIP
    >>> server.start(); server.get_host_and_port()  # doctest: +SKIP
    ('127.0.0.1', 51234)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

#: A WSGI application: ``app(environment, start_response)`` -> body chunks.
WsgiApp = Callable[[dict[str, Any], Any], Iterable[bytes]]

#: Names of this machine's loopback interface that a local SDK may put in ``Host``.
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
#: The signature scheme of boto3's and the AWS CLI's calls to S3 and SQS.
SIGV4 = "AWS4-HMAC-SHA256"


def refusal(request: dict[str, Any], listen_host: str) -> str | None:
    """Why the request must not reach moto, or None when it may.

    Args:
        request: the WSGI environment of the request.
        listen_host: the address the server listens on (also a valid ``Host`` name).
    """
    if "HTTP_ORIGIN" in request:
        return f"a request from a web page (Origin: {request['HTTP_ORIGIN']})"
    if any(name.startswith("HTTP_SEC_FETCH_") for name in request):
        return "a request from a browser (Sec-Fetch headers)"
    host = request.get("HTTP_HOST", "")
    allowed = {
        f"{name}:{request.get('SERVER_PORT', '')}" for name in LOOPBACK_NAMES | {listen_host}
    }
    if host not in allowed:
        return f"Host {host or '(none)'} is not this server's loopback address"
    path = str(request.get("PATH_INFO", ""))
    if path == "/moto-api" or path.startswith("/moto-api/"):
        return "moto's own API is not served here"
    if not _signed(request):
        return "an unsigned request (the AWS SDKs sign every call)"
    return None


def _signed(request: dict[str, Any]) -> bool:
    # Signature Version 4, or 2 (signature_version="s3"): "AWS4-HMAC-SHA256 ..." / "AWS key:sig".
    if str(request.get("HTTP_AUTHORIZATION", "")).startswith((SIGV4 + " ", "AWS ")):
        return True
    query = parse_qs(str(request.get("QUERY_STRING", "")))
    if query.get("X-Amz-Algorithm") == [SIGV4] and query.get("X-Amz-Signature"):
        return True
    # boto3's generate_presigned_url for S3 signs the query with Signature Version 2.
    return all(query.get(name) for name in ("AWSAccessKeyId", "Signature", "Expires"))


class LoopbackGuard:
    """WSGI middleware: passes to ``app`` only what :func:`refusal` lets through."""

    def __init__(self, app: WsgiApp, listen_host: str) -> None:
        self.app = app
        self.listen_host = listen_host

    def __call__(self, request: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        reason = refusal(request, self.listen_host)
        if reason is None:
            return self.app(request, start_response)
        body = (
            f"continuum dev refused {reason}: its stack answers only the AWS SDKs on this "
            "machine, at the endpoint its export line names.\n"
        ).encode()
        start_response(
            "403 Forbidden",
            [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
        )
        return [body]


class GuardedMotoServer:
    """moto's server app behind :class:`LoopbackGuard`, served by a thread.

    The same interface as ``moto.server.ThreadedMotoServer`` (``start``,
    ``get_host_and_port``, ``stop``), which serves moto's app bare.
    """

    def __init__(self, ip_address: str, port: int) -> None:
        self.ip_address, self.port = ip_address, port
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        from moto.moto_server import werkzeug_app
        from werkzeug.serving import make_server

        app = werkzeug_app.DomainDispatcherApplication(werkzeug_app.create_backend_app)
        # moto's own request handler, where this moto has one (the lowest moto in our range
        # serves with werkzeug's, as its ThreadedMotoServer does)
        handler = getattr(werkzeug_app, "MotoRequestHandler", None)
        self._server = make_server(
            self.ip_address,
            self.port,
            LoopbackGuard(app, self.ip_address),
            threaded=True,
            request_handler=handler,
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def get_host_and_port(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
