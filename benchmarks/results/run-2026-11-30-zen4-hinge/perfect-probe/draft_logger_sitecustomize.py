# debug: log every draft the vLLM plugin's DraftBook makes (tmp only)
import json, os
try:
    from foretell.integrations.vllm import proposer as _p
    _orig = _p.DraftBook._drafts

    def _drafts(self, rows, sampled, ntok, ids):
        out = _orig(self, rows, sampled, ntok, ids)
        with open(os.environ.get("FORETELL_DRAFT_LOG", "/tmp/drafts.jsonl"), "a") as f:
            for i, (row, d) in enumerate(zip(rows, out)):
                if row is None:
                    continue
                st = self.requests.get(row.req_id)
                dec = st.decision if st else None
                f.write(json.dumps({"req": row.req_id[-8:], "ntok": int(ntok[i]), "prompt": len(row.prompt_ids),
                                    "sampled": list(map(int, sampled[i])), "draft": list(map(int, d)),
                                    "part": getattr(getattr(dec, "chosen", None), "context", None) if dec else None,
                                    "tail": list(map(int, ids[i, max(0, int(ntok[i]) - 4):int(ntok[i])]))}) + "\n")
        return out
    _p.DraftBook._drafts = _drafts
except Exception as exc:  # noqa
    print("sitecustomize debug failed", exc)
