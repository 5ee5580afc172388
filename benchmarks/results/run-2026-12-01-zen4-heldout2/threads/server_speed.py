"""Through foretell serve on port 8011: the Go explanation prompt (cached after a warm-up), 300 tokens, plain decoding
(speculation none) and n-gram lookup, twice; ms a forward pass. Run from the repository root."""
import sys, time
sys.path.insert(0, "benchmarks/results/run-2026-11-28-spr-heldout")
from tasks import tasks, prompt
from openai import OpenAI
c = OpenAI(base_url="http://127.0.0.1:8011/v1", api_key="x")
m = c.models.list().data[0].id
instr, f, style = tasks["explain_go"]
msgs = [{"role": "user", "content": prompt(instr, f, style)}]
c.chat.completions.create(model=m, messages=msgs, max_tokens=1, temperature=0)
for method in ("none", "ngram", "none", "ngram"):
    t = time.perf_counter()
    r = c.chat.completions.create(model=m, messages=msgs, max_tokens=300, temperature=0, extra_body={"speculation": {"method": method}, "ignore_eos": True})
    dt = time.perf_counter() - t
    st = r.model_extra.get("foretell", {})
    print(method, r.usage.completion_tokens, f"{dt:.2f} s", st.get("forward_passes"), f"{1000*dt/max(1,st.get('forward_passes') or 1):.1f} ms/pass", "cached", r.usage.prompt_tokens_details.cached_tokens if r.usage.prompt_tokens_details else None)
