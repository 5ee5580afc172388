"""One greedy request of a bench task on an engine, as the server runs it: ``method`` "prediction" sends the task's
prediction with method auto (n-gram lookup on beside it), "ngram" sends none. Returns a JSON-ready record."""
import time
from foretell.config import SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest


def one_request(engine, task, method: str, **fields) -> dict:
    with_prediction = method == "prediction"
    r = GenerationRequest(prompt_ids=list(task.prompt_ids), max_tokens=4096, sampling=SamplingParams(temperature=0.0),
                          speculation=SpeculationParams(method="auto" if with_prediction else method,
                                                        prediction=tuple(task.prediction_ids) if with_prediction else None))
    t0 = time.perf_counter()
    chunks = engine.generate([r])[r.request_id]
    dt = time.perf_counter() - t0
    toks = [t for c in chunks for t in c.new_token_ids]
    return {**fields, "task": task.name, "method": method, "wall": round(dt, 3), "tokens": len(toks),
            "passes": chunks[-1].stats.forward_passes, "hash": hash(tuple(toks))}
