"""The round before's peer_probe.py (same arguments), its results written here instead of beside it:
    python peer_probe.py PORT LABEL ROUNDS ARMS(pred,none) [tasks|all] [max_tokens]"""
import os

source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run-2026-11-28-cascadelake-llamacpp",
                      "peer_probe.py")
exec(compile(open(source).read(), source, "exec"), {"__name__": "__main__", "__file__": os.path.abspath(__file__)})
