import torch, glob, numpy as np
from transformers import AutoModelForCausalLM, AutoTokenizer
d = "/root/.cache/foretell/models/qwen2.5-coder-0.5b-instruct-bf16"
tok = AutoTokenizer.from_pretrained(d)
m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
files = sorted(glob.glob("src/foretell/bench/data/realedit/*")) + sorted(glob.glob("src/foretell/bench/data/*.py"))[:3]
caught = []
h = m.lm_head.register_forward_hook(lambda mod, i, o: caught.append(i[0].detach()[0]))
groups = []
with torch.no_grad():
    for f in files:
        t = open(f).read()[:2500]
        msgs = [{"role": "user", "content": "Edit this file:\n```\n" + t + "\n```"}, {"role": "assistant", "content": "Here is the file:\n```\n" + t[:1200] + "\n```\nI changed the names."}]
        ids = tok.apply_chat_template(msgs, return_tensors="pt", return_dict=True)["input_ids"][:, :900]
        caught.clear(); m(ids); groups.append((f, caught[0].double()))
print([ (f.split('/')[-1], len(x)) for f, x in groups])
W = m.lm_head.weight.detach().double()
train = torch.cat([x for i, (f, x) in enumerate(groups) if i % 2 == 0])
test = torch.cat([x for i, (f, x) in enumerate(groups) if i % 2 == 1])[::2]
print("train", len(train), "test", len(test))
ex, vx = torch.linalg.eigh(train.T @ train / len(train))
B = vx.flip(1).T
P = W @ B.T; Q = test @ B.T
L = test @ W.T; mx = L.max(dim=1).values
for dd in (256, 320, 384, 448, 512):
    approx = (Q[:, :dd] @ P[:, :dd].T).float()
    # int8 quantisation of P's first dd coordinates, per row: error <= scale/2 * |q|_1
    scale = P[:, :dd].abs().amax(dim=1) / 127
    qerr = (0.5 * scale[None, :] * Q[:, :dd].abs().sum(dim=1)[:, None]).float()
    for nb in (8, 16, 32):
        edges = np.linspace(dd, 896, nb + 1).astype(int)
        ub = approx + qerr
        for a, b in zip(edges[:-1], edges[1:]):
            ub += (Q[:, a:b].norm(dim=1)[:, None] * P[:, a:b].norm(dim=1)[None, :]).float()
        c = (ub >= mx[:, None].float()).sum(dim=1).float()
        print(f"d={dd} nb={nb}: cand median {c.median():.0f} mean {c.mean():.0f} p90 {c.quantile(0.9):.0f} p99 {c.quantile(0.99):.0f} max {c.max():.0f}")
