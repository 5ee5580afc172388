"""vLLM plain's output token ids on the snake/perfect prompt against the tokenizer's ids of its text."""
import json, sys, urllib.request
from transformers import AutoTokenizer
from foretell.bench.peers import VLLMServer
from foretell.bench.workloads import VERBATIM_INSTRUCTION, chat_prompt_ids, file_prompt, snake_source

m = sys.argv[1]
tok = AutoTokenizer.from_pretrained(m)
prompt = chat_prompt_ids(tok, file_prompt(VERBATIM_INSTRUCTION, snake_source(), reply_rule=None))
with VLLMServer(m, "bfloat16", mode="plain", port=8741) as server:
    body = {"model": "bench", "prompt": prompt, "max_tokens": 256, "temperature": 0, "return_token_ids": True}
    req = urllib.request.Request("http://127.0.0.1:8741/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    r = json.load(urllib.request.urlopen(req, timeout=600))
choice = r["choices"][0]
out = choice.get("token_ids")
print("keys", list(choice))
text = choice["text"]
re = tok.encode(text, add_special_tokens=False)
print(len(out or []), len(re), out == re)
diffs = [i for i in range(min(len(out), len(re))) if out[i] != re[i]]
print("first diffs", diffs[:10])
for i in diffs[:5]:
    print(i, [tok.decode([t]) for t in out[i:i + 3]], [tok.decode([t]) for t in re[i:i + 3]])
