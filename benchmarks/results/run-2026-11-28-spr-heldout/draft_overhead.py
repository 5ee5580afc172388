"""Per-step CPU time of the draft machinery (decide, record, observe) vs whole step, open prompt, no prediction vs garbage."""
import time, sys, statistics, collections, functools
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.api import GenerationRequest
from foretell.engine.llm_engine import LLMEngine
from foretell.core import policy as pol, prediction as pr, ngram as ng, aligner as al
from foretell.bench.workloads import WorkloadOptions, control_tasks
acc = collections.Counter()
def wrap(cls, name, key):
    f = getattr(cls, name)
    @functools.wraps(f)
    def g(*a, **k):
        t = time.perf_counter(); r = f(*a, **k); acc[key] += time.perf_counter() - t; return r
    setattr(cls, name, g)
wrap(pol.DraftPolicy, "decide", "decide"); wrap(pol.DraftPolicy, "record", "record")
wrap(al.PredictionAligner, "observe", "aligner.observe"); wrap(al.PredictionAligner, "propose", "aligner.propose")
wrap(ng.NgramProposer, "observe", "ngram.observe"); wrap(ng.NgramProposer, "propose", "ngram.propose")
engine, _ = LLMEngine.from_config(EngineConfig(exact=True, prefix_cache=False))
recs = []; engine.trace = recs.append
names = sys.argv[2].split(",") if len(sys.argv) > 2 else ["controls/open:no_prediction", "controls/open:garbage"]
tasks = [t for t in control_tasks(engine.tokenizer, WorkloadOptions()) if t.name in names]
for rnd in range(int(sys.argv[1])):
    for task in (tasks if rnd % 2 == 0 else tasks[::-1]):
        recs.clear(); acc.clear()
        req = GenerationRequest(prompt_ids=list(task.prompt_ids), max_tokens=task.max_tokens, sampling=SamplingParams(temperature=0.0),
                                speculation=SpeculationParams(prediction=task.prediction_ids, method="auto"))
        t = time.perf_counter(); engine.generate([req]); dt = time.perf_counter() - t
        print(f"{task.name:32} {dt:.2f}s passes={len(recs)} " + " ".join(f"{k}={v*1000:.0f}ms" for k, v in sorted(acc.items())), flush=True)
