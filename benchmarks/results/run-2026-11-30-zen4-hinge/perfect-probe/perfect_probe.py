import json, sys, urllib.request, time
from transformers import AutoTokenizer
from foretell.bench.workloads import VERBATIM_INSTRUCTION, chat_prompt_ids, file_prompt, snake_source
m, port = sys.argv[1], sys.argv[2]
tok = AutoTokenizer.from_pretrained(m)
prompt = chat_prompt_ids(tok, file_prompt(VERBATIM_INSTRUCTION, snake_source(), reply_rule=None))
pred = json.loads(open(sys.argv[3]).read()) if len(sys.argv) > 3 else None
def go(prediction):
    body = {"model": "bench", "prompt": prompt, "max_tokens": 256, "temperature": 0, "return_token_ids": True}
    if prediction: body["prediction"] = {"type": "content", "content": prediction}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    t = time.time(); r = json.load(urllib.request.urlopen(req, timeout=600)); return r, time.time() - t
r, s = go(None)
text = r["choices"][0]["text"]
json.dump(r["choices"][0]["token_ids"], open("/tmp/perfect_out_ids.json", "w"))
r2, s2 = go(text)
print("plain-ish", s, "with prediction", s2, r2.get("usage"), r2["choices"][0]["text"] == text)
