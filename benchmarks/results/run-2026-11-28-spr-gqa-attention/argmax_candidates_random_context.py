import torch, numpy as np
from foretell.config import EngineConfig
from foretell.engine.llm_engine import LLMEngine
from foretell.engine.kv_cache import SeqKV
from foretell.engine.runner import Segment
from foretell.engine import cpu_gemm
engine, _ = LLMEngine.from_config(EngineConfig(prefix_cache=False))
runner = engine.runner
head = runner.model.get_output_embeddings()
orig = cpu_gemm.ArgmaxHead.logits
log = []
def spy(self, x, weight, out=None):
    n, k = self.shape
    rows = x.reshape(-1, k).contiguous(); m = rows.shape[0]
    res = torch.empty(m, n); top = torch.empty(m, n // 16); lower = torch.empty(m)
    self.gemm._head_bounds(rows.data_ptr(), self.packed.data_ptr(), self.scales.data_ptr(), self.a.data_ptr(), self.c.data_ptr(), res.data_ptr(), top.data_ptr(), lower.data_ptr(), m, n, k, torch.get_num_threads())
    log.append(int((res >= lower[:, None]).any(0).sum()))
    return orig(self, x, weight, out)
cpu_gemm.ArgmaxHead.logits = spy
gen = torch.Generator().manual_seed(0)
kv = SeqKV(runner.kv_shape, 2200, 2200)
toks = torch.randint(0, runner.vocab_size, (2048,), generator=gen).tolist()
for i in range(0, 2048, 512):
    runner.forward([Segment(kv, toks[i:i+512], 1)], reuse_logits=True)
for L in (256, 2048):
    for n in (1, 5, 17):
        kv.length = L; log.clear()
        runner.forward([Segment(kv, torch.randint(0, runner.vocab_size, (n,), generator=gen).tolist(), num_logits=n, argmax_only=True)], reuse_logits=True)
        print(L, n, log)
