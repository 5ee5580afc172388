import json, sys, time
from foretell.bench import workloads as W
from foretell.bench.peers import VLLMServer, _prediction_text
from foretell.models.loader import load_tokenizer, resolve_model
model_dir = str(resolve_model(None, progress=False).path)
tok = load_tokenizer(model_dir)
tasks = W.realedit_tasks(tok, W.WorkloadOptions(max_tokens=384))
out = open(sys.argv[1], "a")
for k in (int(x) for x in sys.argv[2].split(",")):
    for mode in ("ngram", "foretell"):
        with VLLMServer(model_dir, "bfloat16", num_tokens=k, mode=mode) as s:
            s.complete(tasks[0].prompt_ids[:32], 4, "warmup")
            for t in tasks:
                r = s.complete(t.prompt_ids, t.max_tokens, mode, _prediction_text(t, tok) if mode == "foretell" else None)
                row = {"k": k, "mode": mode, "task": t.name, "wall": r.wall_s, "ttft": r.ttft_s, "passes": r.forward_passes, "tokens": len(r.token_ids), "text": r.text}
                out.write(json.dumps(row) + "\n"); out.flush()
                print(k, mode, t.name, round(r.wall_s, 2), r.forward_passes, len(r.token_ids), flush=True)
