"""Per task and arm, per reply: tokens, passes, tokens a pass, decode ms a pass, draft proposed/accepted."""
import json, sys
res = json.load(open(sys.argv[1]))
agg = {}
for name, arms in res.items():
    for arm, xs in arms.items():
        for x in xs:
            f = x["extra"].get("foretell") or {}
            p = f.get("forward_passes") or 0
            a = agg.setdefault(arm, [0, 0, 0.0, 0, 0])
            a[0] += x["tok"]; a[1] += p; a[2] += f.get("decode_s", 0); a[3] += f.get("draft_tokens_proposed", 0); a[4] += f.get("draft_tokens_accepted", 0)
            print(f"{name:14s} {arm:4s} tok {x['tok']:5d} passes {p:4d} tok/pass {x['tok']/max(p,1):5.2f} ms/pass {1e3*f.get('decode_s',0)/max(p,1):6.1f}"
                  f" drafted {f.get('draft_tokens_proposed',0):5d} acc {f.get('draft_tokens_accepted',0):5d} ttft {f.get('ttft_s',0):.2f}")
for arm, (t, p, d, pr, ac) in agg.items():
    print(f"ALL {arm}: {t} tok in {p} passes ({t/p:.2f} a pass), {1e3*d/p:.1f} ms a pass, {1e3*d/t:.2f} ms a token decode; drafted {pr} accepted {ac} ({ac/max(pr,1):.2f})")
