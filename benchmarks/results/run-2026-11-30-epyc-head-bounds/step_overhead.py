"""Per-step time outside the forward pass: plain / ngram / garbage prediction on the open prompt."""
import sys, time, statistics
from foretell.config import EngineConfig, SamplingParams, SpeculationParams
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.api import GenerationRequest
from foretell.bench import workloads as W
from foretell.bench.workloads import chat_prompt_ids
eng, _ = LLMEngine.from_config(EngineConfig(max_num_seqs=1))
tok = eng.tokenizer
ids = chat_prompt_ids(tok, W.OPEN_PROMPT)
garbage = tuple(tok.encode((W.GARBAGE_TEXT * 20)[:1200], add_special_tokens=False))
fwd_times = []
orig = eng._forward
def timed(segs):
    t = time.perf_counter(); r = orig(segs); fwd_times.append((time.perf_counter() - t, sum(len(s.tokens) for s in segs))); return r
eng._forward = timed
def run(method, pred=None):
    req = GenerationRequest(prompt_ids=ids, max_tokens=int(sys.argv[1]) if len(sys.argv) > 1 else 200,
                            sampling=SamplingParams(temperature=0), speculation=SpeculationParams(prediction=pred, method=method))
    eng.add_request(req)
    steps = []
    out = []
    while eng.has_unfinished():
        fwd_times.clear()
        t = time.perf_counter(); o = eng.step(); dt = time.perf_counter() - t
        steps.append((dt, fwd_times[0][0] if fwd_times else 0, fwd_times[0][1] if fwd_times else 0))
        for x in o: out += x.new_token_ids
    dec = [s for s in steps[1:]]  # skip prefill-ish steps
    dec = [s for s in steps if s[2] < 50]
    tot = sum(s[0] for s in dec); fw = sum(s[1] for s in dec)
    print(f"{method:8s} steps {len(dec)} total {tot:.2f}s fwd {fw:.2f}s outside {tot-fw:.3f}s per-step outside {1000*(tot-fw)/len(dec):.2f} ms, fwd/step {1000*fw/len(dec):.1f} ms, tokens {len(out)}")
    return out
run("none")
for r in range(2):
    a = run("none"); b = run("ngram"); c = run("auto", garbage)
    print("same", a == b == c)
