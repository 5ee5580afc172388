"""How many candidates would an int4 copy of the head's blocks leave (rigorous per-block bounds)?"""
import torch, glob
from transformers import AutoModelForCausalLM, AutoTokenizer
d = "/root/.cache/foretell/models/qwen2.5-coder-0.5b-instruct-bf16"
tok = AutoTokenizer.from_pretrained(d)
m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
caught = []
m.lm_head.register_forward_hook(lambda mod, i, o: caught.append(i[0].detach()[0]))
with torch.no_grad():
    for f in sorted(glob.glob("src/foretell/bench/data/realedit/*"))[:4]:
        t = open(f).read()[:2000]
        msgs = [{"role": "user", "content": "Edit this file:\n```\n" + t + "\n```"}, {"role": "assistant", "content": "Here it is:\n```\n" + t[:1000] + "\n```\nDone."}]
        ids = tok.apply_chat_template(msgs, return_tensors="pt", return_dict=True)["input_ids"][:, :700]
        m(ids)
X = torch.cat(caught)[::3]
W = m.lm_head.weight.detach()
V, K = W.shape
Wb = W.view(V, K // 32, 32)
for bits, qmax in ((4, 7), (5, 15), (6, 31)):
    s = Wb.abs().amax(-1, keepdim=True) / qmax
    s = torch.where(s > 0, s, torch.ones_like(s))
    q = torch.round(Wb / s).clamp(-qmax - 1, qmax)
    err = (Wb - q * s).abs().amax(-1)  # per block max error  [V, K/32]
    Wq = (q * s).view(V, K)
    L = X @ W.T
    A = X @ Wq.T
    xa = X.view(len(X), K // 32, 32).abs().sum(-1)  # [N, K/32]
    H = xa @ err.T  # half width [N, V]
    lower = (A - H).max(dim=1).values
    cand = (A + H >= lower[:, None]).sum(1).float()
    Hs = xa.sum(1, keepdim=True) * err.amax(1)[None, :]
    lower_s = (A - Hs).max(dim=1).values
    cand_s = (A + Hs >= lower_s[:, None]).sum(1).float()
    print(f"  per-row scalar bound: candidates median {cand_s.median():.0f} mean {cand_s.mean():.0f} p90 {cand_s.quantile(0.9):.0f} p99 {cand_s.quantile(0.99):.0f} max {cand_s.max():.0f}")
    print(f"int{bits}: candidates median {cand.median():.0f} mean {cand.mean():.0f} p90 {cand.quantile(0.9):.0f} p99 {cand.quantile(0.99):.0f} max {cand.max():.0f}; half-width median {H.median():.2f}")
