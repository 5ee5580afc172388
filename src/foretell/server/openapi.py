"""The server's own OpenAPI document (``GET /openapi.json``), built from the protocol models.

The generation routes read and validate their bodies themselves (to answer OpenAI's 400 naming the field),
so FastAPI cannot see their schemas; this adds them: request bodies from ``protocol``'s pydantic models,
the JSON and SSE success responses, and OpenAI's error shape for every error status. The API fuzzing test
(schemathesis) generates requests from this document and checks the answers against it.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from foretell.server import protocol as P
from foretell.server import responses as R

_REF = "#/components/schemas/{model}"
_ERRORS = {
    "400": "Invalid request (the offending field in error.param)",
    "401": "Missing or wrong API key",
    "404": "Unknown model or route",
    "413": "Request body too large",
    "429": "Queue full; retry after Retry-After seconds",
    "500": "Internal error for this request",
    "503": "Out of memory for this request; retry after Retry-After seconds",
}
_GENERATION = {
    "/v1/chat/completions": (P.ChatCompletionRequest, P.ChatCompletion),
    "/v1/completions": (P.CompletionRequest, P.Completion),
    "/v1/responses": (R.ResponsesRequest, R.ResponseObject),
}
_POSTS = {"/tokenize": (P.TokenizeRequest, P.TokenizeResponse), "/detokenize": (P.DetokenizeRequest, P.DetokenizeResponse)}
_READS = {"/v1/models": P.ModelList, "/v1/models/{model_id}": P.ModelCard, "/v1/responses/{response_id}": R.ResponseObject}


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(BaseModel):
    error: ErrorBody


def openapi_document(app: FastAPI) -> dict:
    """Build once per app and cache on ``app.openapi_schema``."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    doc = get_openapi(title=app.title, version=app.version, routes=app.routes)
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    error_ref = _schema_ref(ErrorResponse, schemas)
    for path, methods in doc.get("paths", {}).items():
        for method, op in methods.items():
            if path != "/health":
                op.setdefault("responses", {}).update(
                    {code: {"description": d, "content": {"application/json": {"schema": error_ref}}}
                     for code, d in _ERRORS.items() if code not in ("413", "429", "503") or method == "post"}
                )
            if method == "post" and path in _GENERATION:
                request_model, response_model = _GENERATION[path]
                op["requestBody"] = {"required": True, "content": {
                    "application/json": {"schema": _schema_ref(request_model, schemas)}}}
                op["responses"]["200"] = {"description": "The completion, or an SSE stream when stream is true",
                                          "content": {"application/json": {"schema": _schema_ref(response_model, schemas)},
                                                      "text/event-stream": {"schema": {"type": "string"}}}}
            if method == "post" and path in _POSTS:
                request_model, response_model = _POSTS[path]
                op["requestBody"] = {"required": True, "content": {
                    "application/json": {"schema": _schema_ref(request_model, schemas)}}}
                op["responses"]["200"] = {"description": "OK", "content": {
                    "application/json": {"schema": _schema_ref(response_model, schemas)}}}
            if method == "get" and path in _READS:
                op["responses"]["200"] = {"description": "OK", "content": {
                    "application/json": {"schema": _schema_ref(_READS[path], schemas)}}}
            if method == "delete" and path == "/v1/responses/{response_id}":
                op["responses"]["200"] = {"description": "Deleted", "content": {
                    "application/json": {"schema": _schema_ref(R.DeletedResponse, schemas)}}}
            if path == "/metrics":
                op["responses"]["200"] = {"description": "Prometheus text format",
                                          "content": {"text/plain": {"schema": {"type": "string"}}}}
    app.openapi_schema = doc
    return doc


def _schema_ref(model: type[BaseModel], schemas: dict) -> dict:
    schema = model.model_json_schema(ref_template=_REF)
    schemas.update(schema.pop("$defs", {}))
    schemas[model.__name__] = schema
    return {"$ref": _REF.format(model=model.__name__)}
