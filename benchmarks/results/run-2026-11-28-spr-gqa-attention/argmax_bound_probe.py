import torch, numpy as np
from foretell.models.loader import resolve_model, load_tokenizer
from transformers import AutoModelForCausalLM
path = resolve_model("default").path
tok = load_tokenizer(path)
m = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
text = open("src/foretell/bench/data/snake.py").read()[:6000]
ids = tok(text, return_tensors="pt").input_ids[:, :1200]
with torch.no_grad():
    h = m.model(ids).last_hidden_state[0]  # [T, 896]
W = m.lm_head.weight.detach().float()  # [V, 896]
x = h.bfloat16().float()
exact = x @ W.T
for name, group in (("row", W.shape[1]), ("g32", 32), ("g128", 128)):
    Wg = W.reshape(W.shape[0], -1, group)
    scale = Wg.abs().amax(-1, keepdim=True) / 127
    q = torch.round(Wg / scale).clamp(-127, 127)
    approx = torch.einsum("vgk,tgk->tv", q * scale, x.reshape(x.shape[0], -1, group))
    xg1 = x.reshape(x.shape[0], -1, group).abs().sum(-1)  # [T, G]
    bound = (scale[..., 0] / 2) @ xg1.T  # [V, T] -> T,V
    bound = bound.T * 1.001 + 1e-3
    err = (approx - exact).abs()
    assert (err <= bound).all(), "bound violated"
    lo = (approx - bound).amax(-1, keepdim=True)
    cand = ((approx + bound) >= lo).sum(-1).float()
    print(name, "bound median", bound.median().item(), "actual err max", err.max().item(), "candidates: median", cand.median().item(), "p90", cand.quantile(0.9).item(), "max", cand.max().item())
print("x abs max per row: median", x.abs().amax(-1).median().item(), "max", x.abs().amax(-1).max().item(), "||x||1 median", x.abs().sum(-1).median().item())
scale = W.abs().amax(-1, keepdim=True) / 127
qw = torch.round(W / scale).clamp(-127, 127)
sx = x.abs().amax(-1, keepdim=True) / 127
qx = torch.round(x / sx).clamp(-127, 127)
approx = (qx @ qw.T) * sx * scale.T
bound = (scale.T / 2) * x.abs().sum(-1, keepdim=True) + (sx / 2) * (qw.abs().sum(-1) * scale[:, 0])[None, :]
bound = bound * 1.02 + 1e-3
err = (approx - exact).abs()
print("int8 x too: bound median", bound.median().item(), "err max", err.max().item(), "violations", (err > bound).sum().item())
lo = (approx - bound).amax(-1, keepdim=True)
cand = ((approx + bound) >= lo).sum(-1).float()
print("candidates: median", cand.median().item(), "p90", cand.quantile(0.9).item(), "p99", cand.quantile(0.99).item(), "max", cand.max().item())
sx = x.abs().amax(-1, keepdim=True) / 32767
qx = torch.round(x / sx).clamp(-32767, 32767)
approx = (qx.double() @ qw.T.double()).float() * sx * scale.T
l1q = (qw.abs().sum(-1) * scale[:, 0])[None, :]
bound = (scale.T / 2) * x.abs().sum(-1, keepdim=True) + (sx / 2) * l1q
err = (approx - exact).abs()
print("int16 x: bound median", bound.median().item(), "err max", err.max().item(), "violations", (err > bound).sum().item(), "max err/bound", (err / bound).max().item())
for margin in (1.0, 2.0):
    b = bound * margin + 1e-3
    lo = (approx - b).amax(-1, keepdim=True)
    cand = ((approx + b) >= lo).sum(-1).float()
    print(margin, "candidates: median", cand.median().item(), "p90", cand.quantile(0.9).item(), "p99", cand.quantile(0.99).item(), "max", cand.max().item())
torch.save(h, "/tmp/hidden.pt")
