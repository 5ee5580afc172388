import json, sys, re, difflib, collections, glob
from foretell.bench.workloads import WorkloadOptions, build_tasks
from foretell.models.loader import load_tokenizer, resolve_model
tok = load_tokenizer(resolve_model(None).path)
tasks = {t.name: t for t in build_tasks(tok, ["realedit","longfile","controls","edit"], WorkloadOptions())[0]}
files = sys.argv[1:]
stats = collections.defaultdict(lambda: [0,0])
def words(s): return set(w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", s))
for f in files:
    r = json.load(open(f))
    for t in r["tasks"]:
        task = tasks.get(t["name"])
        if task is None or not task.prediction_ids: continue
        P = list(task.prediction_ids)
        O = tok.encode(t["runs"]["foretell"]["text"], add_special_tokens=False)
        ptext = [tok.decode([x]) for x in P]
        instr = words(task.instruction)
        # features per P index
        line_start = [False]*len(P); after_nl=[False]*len(P); in_instr=[False]*len(P)
        prev_nl = True
        for j,s in enumerate(ptext):
            after_nl[j] = prev_nl
            if prev_nl and s.strip(): line_start[j] = True; prev_nl = False
            elif prev_nl and not s.strip(): pass
            if "\n" in s: prev_nl = True
            ws = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", s)
            in_instr[j] = any(w in instr or any(w in iw for iw in instr) and len(w)>=3 for w in ws)
        ops = difflib.SequenceMatcher(None, P, O, autojunk=False).get_opcodes()
        risk = []; div = set()
        for n,(tag,i1,i2,j1,j2) in enumerate(ops):
            if tag == "equal":
                risk += range(i1, i2)
                if n+1 < len(ops):
                    nxt = ops[n+1]
                    if nxt[1] < len(P): risk.append(nxt[1]); div.add(nxt[1])
        last = None; prev_eq_start = {}
        for (tag,i1,i2,j1,j2) in ops:
            if tag=="equal":
                for j in range(i1,i2): prev_eq_start[j]=j-i1
                if i2 < len(P): prev_eq_start.setdefault(i2, i2-i1)
        for j in risk:
            d = prev_eq_start.get(j, 0)
            b = "d<4" if d<4 else "d<16" if d<16 else "d<64" if d<64 else "d<256" if d<256 else "d>=256"
            stats[b][0]+=1; stats[b][1]+= j in div
            key = ("ls" if line_start[j] else "an" if after_nl[j] else "mid") + ("+instr" if in_instr[j] else "")
            stats[key][0] += 1; stats[key][1] += j in div
            stats["all"][0] += 1; stats["all"][1] += j in div
for k,(n,d) in sorted(stats.items()):
    print(f"{k:12s} at-risk {n:6d} divergences {d:4d} hazard {d/max(n,1):.4f}")
