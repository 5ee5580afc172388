"""Random predicted-output requests through the official client, each with and without its prediction: the same
text, finish reasons and logprobs, the same completion token count, no 5xx. Greedy, or seeded sampling (40%).

    python fuzz.py PORT REQUESTS [SEED]"""
import sys, random, json, os
from openai import OpenAI
import openai
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run-2026-11-28-spr-heldout"))
from tasks import tasks, prompt
port = sys.argv[1]; N = int(sys.argv[2]); seed0 = int(sys.argv[3]) if len(sys.argv) > 3 else 0
c = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=600)
model = c.models.list().data[0].id
files = list({id(f): f for _, f, _ in tasks.values()}.values())
instrs = ["Rename every variable named x to y. Reply with the whole file.", "Add a comment at the top. Output the full file.",
          "Fix any bugs. Return only the code.", "Explain this code briefly.", "Translate the comments to French; whole file.",
          "Return the file unchanged.", "Delete the last function. Full file please."]
def mutate(f, rng):
    lines = f.split("\n"); kind = rng.choice(["exact", "del", "ins", "trunc", "empty", "garbage", "unicode", "ws", "dup", "parts", "tail"])
    if kind == "del" and len(lines) > 3:
        for _ in range(rng.randint(1, 5)): lines.pop(rng.randrange(len(lines)))
    elif kind == "ins":
        for _ in range(rng.randint(1, 5)): lines.insert(rng.randrange(len(lines)), "# " + "".join(rng.choice("abc xyz") for _ in range(20)))
    elif kind == "trunc": lines = lines[: len(lines) // 2]
    elif kind == "empty": return kind, ""
    elif kind == "garbage": return kind, "".join(rng.choice("qwertyuiop{}();\n ") for _ in range(rng.randint(1, 3000)))
    elif kind == "unicode": lines.insert(rng.randrange(len(lines)), "# héllo wörld 你好 🎉🎉 ∑∫ \u200b")
    elif kind == "ws": lines = [l.replace("    ", "\t") for l in lines]
    elif kind == "dup": lines = lines + lines
    elif kind == "tail": lines = lines[len(lines) // 2:]
    text = "\n".join(lines)
    if kind == "parts":
        cut = rng.randrange(len(text) + 1)
        return kind, [{"type": "text", "text": text[:cut]}, {"type": "text", "text": text[cut:]}]
    return kind, text
bad = 0
for it in range(N):
    rng = random.Random(seed0 * 1000 + it)
    f = rng.choice(files); instr = rng.choice(instrs)
    msgs = [{"role": "user", "content": instr + "\n\n```\n" + f + "```"}]
    if rng.random() < 0.3: msgs.insert(0, {"role": "system", "content": "You are a careful coding assistant."})
    kind, pred = mutate(f, rng)
    kw = dict(model=model, messages=msgs, temperature=0, max_tokens=rng.choice([1, 2, 5, 17, 64, 150, 300]))
    if rng.random() < 0.3:
        lines = [l for l in f.split("\n") if l.strip()]
        kw["stop"] = [rng.choice(lines)[: rng.randint(2, 12)]] if lines else None
    if rng.random() < 0.25: kw["logprobs"] = True; kw["top_logprobs"] = rng.choice([0, 2])
    if rng.random() < 0.2: kw["presence_penalty"] = 0.5
    if rng.random() < 0.2: kw["frequency_penalty"] = 0.3
    if rng.random() < 0.15: kw["n"] = 2
    if rng.random() < 0.4: kw["temperature"] = rng.choice([0.5, 1.0]); kw["seed"] = rng.randint(0, 99); kw["top_p"] = rng.choice([1.0, 0.9])
    stream = rng.random() < 0.35
    out = {}
    for arm in ("pred", "none"):
        a = dict(kw)
        if arm == "pred": a["prediction"] = {"type": "content", "content": pred}
        try:
            if stream:
                a["stream"] = True; a["stream_options"] = {"include_usage": True}
                texts, fins, usage = {}, {}, None
                for ch in c.chat.completions.create(**a):
                    if ch.usage: usage = ch.usage
                    for cc in ch.choices:
                        texts[cc.index] = texts.get(cc.index, "") + (cc.delta.content or "")
                        if cc.finish_reason: fins[cc.index] = cc.finish_reason
                out[arm] = (tuple(texts[i] for i in sorted(texts)), tuple(fins[i] for i in sorted(fins)), None, usage)
            else:
                r = c.chat.completions.create(**a)
                lp = [json.dumps(ch.logprobs.model_dump() if ch.logprobs else None) for ch in r.choices]
                out[arm] = (tuple(ch.message.content for ch in r.choices), tuple(ch.finish_reason for ch in r.choices), tuple(lp), r.usage)
        except openai.APIStatusError as e:
            out[arm] = ("ERR", e.status_code, str(e.body)[:200], None)
    p, n = out["pred"], out["none"]
    ok = p[:3] == n[:3]
    u = p[3]
    note = ""
    if u is not None and u.completion_tokens_details is not None:
        d = u.completion_tokens_details
        note = f"acc {d.accepted_prediction_tokens} rej {d.rejected_prediction_tokens}"
        if n[3] is not None and u.completion_tokens != n[3].completion_tokens: ok = False; note += " TOKENS DIFFER"
    if p[0] == "ERR" or n[0] == "ERR": ok = ok and p[1] < 500
    if not ok: bad += 1
    print(f"{it:3} {'ok ' if ok else 'BAD'} kind={kind:8} stream={stream} max={kw['max_tokens']} n={kw.get('n',1)} stop={'stop' in kw} lp={'logprobs' in kw} {note}" + ("" if ok else f"\n   pred={str(p)[:300]}\n   none={str(n)[:300]}"), flush=True)
print("bad", bad)
