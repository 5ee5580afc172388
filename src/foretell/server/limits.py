"""Request body size limit, enforced while the body arrives (pure ASGI middleware).

A body whose ``Content-Length`` exceeds the limit is refused with 413 before a byte of it is read; a chunked
body is counted as it streams in and refused as soon as it passes the limit. Either way the server never
holds more than the limit of one request's body in memory, and the event loop never parses a huge JSON.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException

from foretell.server.errors import APIError

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024  # a 32k-token prompt plus a 32k-token prediction is ~0.5 MB


def too_large(limit: int) -> APIError:
    return APIError(413, f"the request body is larger than this server's limit of {limit} bytes",
                    code="request_too_large")


class BodySizeLimit:
    """Refuse request bodies over ``max_bytes`` with 413 in OpenAI's error shape."""

    def __init__(self, app, max_bytes: int = DEFAULT_MAX_BODY_BYTES):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            return await too_large(self.max_bytes).response()(scope, receive, send)
        seen = 0

        async def counted_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:  # handled by the app's HTTPException handler → 413
                    raise HTTPException(413, too_large(self.max_bytes).message)
            return message

        await self.app(scope, counted_receive, send)


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
