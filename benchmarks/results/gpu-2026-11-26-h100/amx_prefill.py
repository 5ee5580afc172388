import os, sys, time
import torch
torch.set_num_threads(2)
from transformers import AutoConfig, AutoModelForCausalLM
import foretell
from foretell.engine.kv_cache import SeqKV
from foretell.engine.llm_engine import _cpu_linears
from foretell.engine.runner import ModelRunner, Segment
cfg = AutoConfig.from_pretrained(sys.argv[1])
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
_cpu_linears(model, packed_only=False)
r = ModelRunner(model)
toks = torch.randint(0, 10000, (2048,)).tolist()
times = []
for _ in range(4):
    kv = SeqKV(r.kv_shape, 2056, 2056)
    s = time.perf_counter()
    for i in range(0, 2048, 512):
        r.forward([Segment(kv, toks[i:i + 512], num_logits=1 if i + 512 >= 2048 else 0)]); kv.length += 512
    times.append(time.perf_counter() - s)
print(foretell.__file__.split("/")[-3], "prefill 2048:", " ".join(f"{t:.2f}" for t in times), flush=True)
