"""API fuzzing with schemathesis against the server's own OpenAPI document, on the real engine (tiny model,
short context so every generated request finishes quickly): no 5xx, and every response (status, content
type, body) conforms to the document. Bounded: a few dozen examples per operation."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from foretell.config import EngineConfig  # noqa: E402
from foretell.engine.async_engine import AsyncEngine  # noqa: E402
from foretell.server import build_app  # noqa: E402
from foretell.testing import make_tiny_model, make_tiny_tokenizer  # noqa: E402

# Not positive_data_acceptance: many schema-valid requests are refused on meaning (an unknown model, an
# unknown role, a prompt longer than the context), with a documented 4xx naming the field.
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance, negative_data_rejection]

_ENGINE = AsyncEngine.from_model(
    make_tiny_model(seed=6),
    make_tiny_tokenizer(),
    EngineConfig(measure_cost_curve=False, max_model_len=96, kv_budget_tokens=4096, max_num_seqs=4, max_queue=8,
                 max_prediction_tokens=256),
    "tiny",
)
schema = schemathesis.openapi.from_asgi("/openapi.json", build_app(_ENGINE))


@pytest.fixture(scope="module", autouse=True)
def _stop_engine():
    yield
    _ENGINE.shutdown()


@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_own_schema_and_never_errors(case):
    case.call_and_validate(checks=CHECKS)
