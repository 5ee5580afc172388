"""Host CPU (AMX): the 0.5B's shapes (random bf16 weights), default (non-exact) route as from_config builds it
(linears by the default plan), pass times after 1,024 keys and a 2,048-token prefill, 2 threads."""
import os, statistics, sys, time
import torch
torch.set_num_threads(2)
from transformers import AutoConfig, AutoModelForCausalLM
import foretell
from foretell.engine.kv_cache import SeqKV
from foretell.engine.llm_engine import _cpu_linears
from foretell.engine.runner import ModelRunner, Segment
print(foretell.__file__, flush=True)
cfg = AutoConfig.from_pretrained(sys.argv[1])
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
_cpu_linears(model, packed_only=False)
r = ModelRunner(model)
print("attention kernel", getattr(r, "attention_kernel", None) is not None, "chunks", getattr(r, "chunk_attention_kernel", "n/a") is not None, flush=True)
ctx = 1024
kv = SeqKV(r.kv_shape, ctx + 200, ctx + 200)
r.forward([Segment(kv, torch.randint(0, r.vocab_size, (ctx,)).tolist(), 1)])
res = {}
for rnd in range(6):
    for n in (1, 16, 64, 128):
        kv.length = ctx
        s = time.perf_counter(); r.forward([Segment(kv, list(range(100, 100 + n)), n)], reuse_logits=True); dt = time.perf_counter() - s
        if rnd: res.setdefault(n, []).append(dt)
print("pass ms after 1024 keys:", " ".join(f"{n}:{min(v)*1e3:.1f}" for n, v in res.items()), flush=True)
toks = torch.randint(0, 10000, (2048,)).tolist()
best = float("inf")
for _ in range(2):
    kv = SeqKV(r.kv_shape, 2056, 2056)
    s = time.perf_counter()
    for i in range(0, 2048, 512):
        r.forward([Segment(kv, toks[i:i + 512], num_logits=1 if i + 512 >= 2048 else 0)]); kv.length += 512
    best = min(best, time.perf_counter() - s)
print(f"prefill 2048: {best:.2f} s", flush=True)
