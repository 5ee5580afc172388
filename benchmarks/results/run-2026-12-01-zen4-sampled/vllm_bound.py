"""Copy bound for vLLM + any copying drafter on vLLM CPU's measured step cost (a + b * draft tokens)."""
import json, sys, math, numpy as np
from foretell.models.loader import load_tokenizer, resolve_model
from foretell.bench.workloads import realedit_tasks, WorkloadOptions
from foretell.core.simulate import copy_runs
path = sys.argv[1]
rows = [json.loads(l) for l in open(path)]
tok = load_tokenizer(resolve_model("default").path)
tasks = {t.name: t for t in realedit_tasks(tok, WorkloadOptions())}
sp = [r for r in rows if r['variant'] in ('vllm_ngram', 'vllm_foretell') and r['task'] in tasks]
A = np.array([[r['forward_passes'], r['draft_proposed']] for r in sp], float); y = np.array([r['decode_s'] for r in sp])
(a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
print(f"fit: {a*1e3:.1f} ms a pass + {b*1e3:.2f} ms a draft token; resid max {np.abs(A@[a,b]-y).max():.2f} s")
by = {(r['variant'], r['task']): r for r in rows}
gm = []; gact = []
for name, t in tasks.items():
    f, n = by.get(('vllm_foretell', name)), by.get(('vllm_ngram', name))
    if not f or not n: continue
    ids = tok.encode(f['text'], add_special_tokens=False)
    runs = copy_runs([t.prediction_ids, t.prompt_ids], ids, 128)[1:]
    N = len(runs); best = np.zeros(N + 2)
    for i in range(N - 1, -1, -1):
        dmax = min(runs[i], N - 1 - i)
        best[i] = min(a + b * d + best[i + d + 1] for d in range(dmax + 1))
    wall = min(f['ttft_s'], n['ttft_s']) + best[0]
    gm.append(n['wall_s'] / wall); gact.append(n['wall_s'] / f['wall_s'])
    print(f"{name:26s} ngram {n['wall_s']:6.2f} foretell {f['wall_s']:6.2f} ({gact[-1]:.2f}x) bound {wall:6.2f} ({gm[-1]:.2f}x)")
g = lambda v: math.exp(sum(map(math.log, v)) / len(v))
print(f"geomean measured {g(gact):.3f}  bound {g(gm):.3f}")
