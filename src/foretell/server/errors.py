"""OpenAI-shaped errors: ``{"error": {"message", "type", "param", "code"}}`` for every failure.

Bad input is always a 4xx naming the offending field in ``param``; only a bug in the server or the engine
gives a 500. Pydantic validation errors become 400 (not FastAPI's 422), as OpenAI returns them.
"""

from __future__ import annotations

import logging
from typing import Iterable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from foretell.config import ConfigError
from foretell.engine.api import EngineError, QueueFullError, RequestFailedError, RequestTooLongError

log = logging.getLogger("foretell.server")

_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


class APIError(Exception):
    """An error answered to the client in OpenAI's shape."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    def body(self) -> dict:
        kind = _TYPES.get(self.status, "server_error")
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}

    def response(self, headers: dict | None = None) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def bad_request(param: str | None, message: str, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


# -- pydantic → 400 -------------------------------------------------------------------------------
def loc_to_param(loc: Iterable, field_names: frozenset[str]) -> str | None:
    """``('messages', 0, 'content', 'str')`` → ``messages[0].content``; union-member tags are dropped."""
    out = ""
    for item in loc:
        if isinstance(item, int):
            out += f"[{item}]"
        elif item in field_names:
            out += f".{item}" if out else item
    return out or None


def from_validation_error(exc: ValidationError, field_names: frozenset[str]) -> APIError:
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
    if first["type"] == "json_invalid":
        return bad_request(None, f"the request body is not valid JSON ({first['msg']})", code="invalid_json")
    if first["type"] == "model_type" and not first["loc"]:
        return bad_request(None, "the request body must be a JSON object", code="invalid_json")
    param = loc_to_param(first["loc"], field_names)
    msg = first["msg"]
    if first["type"] == "missing":
        msg = "is required"
    elif first["type"] == "extra_forbidden":
        msg = "unrecognized field"
    message = f"{param}: {msg}" if param else msg
    return bad_request(param, message, code="invalid_value" if first["type"] != "missing" else "missing_required_parameter")


# -- engine errors → status ------------------------------------------------------------------------
def from_engine_error(exc: Exception, rename: dict[str, str] | None = None) -> APIError:
    """Map the engine's exceptions; ``rename`` maps the engine's field names to this endpoint's."""
    rename = rename or {}
    if isinstance(exc, QueueFullError):
        return APIError(429, f"the server is busy, retry later ({exc})", code="queue_full")
    if isinstance(exc, RequestTooLongError):
        field = rename.get(exc.field, exc.field)
        code = "prediction_too_long" if exc.field == "prediction" else "context_length_exceeded"
        return bad_request(field, str(exc), code=code)
    if isinstance(exc, ConfigError):
        field = rename.get(exc.field, exc.field)
        return bad_request(field, f"{field}: {exc.message}", code="invalid_value")
    if isinstance(exc, RequestFailedError):
        return APIError(exc.status, str(exc), code=exc.code)
    if isinstance(exc, EngineError):
        return APIError(exc.status, str(exc) or type(exc).__name__)
    return APIError(500, "internal server error", code="internal_error")


# -- handlers -------------------------------------------------------------------------------------
RETRY_AFTER_S = 1  # what a 429 (queue full) or 503 (out of memory) asks the client to wait


async def _api_error(_: Request, exc: APIError) -> JSONResponse:
    headers = {401: {"WWW-Authenticate": "Bearer"}, 429: {"Retry-After": str(RETRY_AFTER_S)}}.get(exc.status)
    if exc.status == 503:
        headers = {"Retry-After": str(RETRY_AFTER_S)}
    return exc.response(headers=headers)


async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}.get(exc.status_code)
    return APIError(exc.status_code, str(exc.detail), code=code).response(headers=getattr(exc, "headers", None))


async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    loc = [x for x in (errors[0]["loc"] if errors else ()) if x != "body"]
    param = loc_to_param(loc, frozenset(str(x) for x in loc if isinstance(x, str)))
    return bad_request(param, errors[0]["msg"] if errors else "invalid request").response()


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return APIError(500, "internal server error", code="internal_error").response()


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(APIError, _api_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected)
