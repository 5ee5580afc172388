"""realedit tasks through the official client, arms alternating: python port_probe.py PORT ROUNDS kind[,kind] [max_tokens]"""
import sys, time, json, statistics
from pathlib import Path
from openai import OpenAI
from foretell.bench import workloads as W
port, rounds, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
maxt = int(sys.argv[4]) if len(sys.argv) > 4 else 384
c = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=1200)
model = c.models.list().data[0].id
table = {k: (f, i) for f, k, i in W.REALEDIT_TASKS}
for kind in kinds:
    f, instr = table[kind]
    code = (W.DATA_DIR / "realedit" / f).read_text()
    msgs = [{"role": "user", "content": W.file_prompt(instr, code, W.REPLY_RULE, W.FENCE_LANGUAGE[Path(f).suffix])}]
    c.chat.completions.create(model=model, messages=msgs, temperature=0, max_tokens=1)
    res = {"pred": [], "none": []}
    for r in range(rounds):
        for arm in (["pred", "none"] if r % 2 == 0 else ["none", "pred"]):
            kw = dict(model=model, messages=msgs, max_tokens=maxt, temperature=0)
            if arm == "pred": kw["prediction"] = {"type": "content", "content": code}
            t = time.perf_counter(); resp = c.chat.completions.create(**kw); dt = time.perf_counter() - t
            st = resp.model_extra.get("foretell") or {}
            res[arm].append((dt, st.get("forward_passes"), resp.choices[0].message.content))
    same = len({x[2] for x in res["pred"] + res["none"]}) == 1
    ratios = [n[0] / p[0] for p, n in zip(res["pred"], res["none"])]
    print(kind, "pred", [round(x[0], 2) for x in res["pred"]], [x[1] for x in res["pred"]], "none", [round(x[0], 2) for x in res["none"]], [x[1] for x in res["none"]], "ratio med %.2f" % statistics.median(ratios), [round(x, 2) for x in ratios], "same", same, flush=True)
