#!/usr/bin/env bash
# Build what benchmarks/gpu_vllm.sh needs on a lent GPU machine that reaches no registry, under tmp/dev/ (ignored):
#   s0 s1 sw.sha256  sw.tar.xz in parts of 60 MB: vsite/ (vllm 0.26.0's CUDA wheel unpacked, less its FA2 and MoE
#                    kernels and vllm-rs), deps/ (benchmarks/gpu_vllm_deps.txt, cp312 wheels unpacked), tf/
#                    (transformers 5.24.0 for foretell itself)
#   cfg.tar.xz       the default model's config and tokenizer (q05cfg/), for gpu_vllm.sh's smoke server
#   m0..m7           the default model's GGUF (the six PyPI chunks concatenated), 61.4 MB each
# Needs .venv (scripts/setup-venv "test,default-model") and PyPI. About 10 minutes on 2 cores (xz most of it).
# A call carries at most 64 MiB with the working tree: move benchmarks/results out of the checkout for the lease.
#
#   benchmarks/gpu_vllm_parts.sh [sw] [model]     (both by default)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEV=$ROOT/tmp/dev
WORK=${GPU_PARTS_WORK:-/tmp/gpu-vllm-parts}
PY=$ROOT/.venv/bin/python
PLATFORMS=""
for n in 35 34 31 28 27 24 17; do PLATFORMS+=" --platform manylinux_2_${n}_x86_64"; done
PLATFORMS+=" --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
PIP_TARGET_ARGS="--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none $PLATFORMS"
mkdir -p "$DEV"

sw() {
  rm -rf "$WORK" && mkdir -p "$WORK"/{whl,root/vsite,root/tf}
  # shellcheck disable=SC2086
  "$PY" -m pip download -q --no-deps $PIP_TARGET_ARGS -d "$WORK/whl" vllm==0.26.0 transformers==5.24.0
  (cd "$WORK/root/vsite" && unzip -q "$WORK"/whl/vllm-0.26.0-*.whl)
  (cd "$WORK/root/tf" && unzip -q "$WORK"/whl/transformers-5.24.0-*.whl)
  # optional in vLLM's source: FA2 is imported under try/except (FA3 serves Hopper), the MoE kernels under
  # contextlib.suppress (the model is dense), vllm-rs only with VLLM_USE_RUST_FRONTEND
  rm -f "$WORK"/root/vsite/vllm/vllm_flash_attn/_vllm_fa2_C*.so "$WORK"/root/vsite/vllm/_moe_C*.so \
    "$WORK"/root/vsite/vllm/vllm-rs
  # shellcheck disable=SC2086
  "$PY" -m pip install -q --no-deps --no-compile --target "$WORK/root/deps" $PIP_TARGET_ARGS \
    -r benchmarks/gpu_vllm_deps.txt
  tar -C "$WORK/root" --owner=0 --group=0 --sort=name -cf - vsite deps tf | xz -6 -T2 > "$WORK/sw.tar.xz"
  rm -f "$DEV"/s[0-9]*
  split -b 60000000 -d -a 1 "$WORK/sw.tar.xz" "$DEV/s"
  cat "$DEV"/s[0-9]* | sha256sum | cut -c1-64 > "$DEV/sw.sha256"
  ls -l "$DEV"/s[0-9]* "$DEV/sw.sha256"
}

model() {
  local dir chunks
  chunks=$("$PY" -c "from foretell.models import default_model as dm; print(' '.join(map(str, dm.locate_chunks())))")
  cat $chunks > "$WORK.gguf"
  echo "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32  $WORK.gguf" | sha256sum -c
  rm -f "$DEV"/m[0-9]*
  split -b 61425008 -d -a 1 "$WORK.gguf" "$DEV/m" && rm -f "$WORK.gguf"
  dir=$("$PY" -c "from foretell.models import default_model as dm; print(dm.packaged_model_dir(progress=False))")
  rm -rf "$WORK-cfg/q05cfg" && mkdir -p "$WORK-cfg/q05cfg"
  cp "$dir"/*.json "$dir"/*.jinja "$WORK-cfg/q05cfg/"
  tar -C "$WORK-cfg" -cJf "$DEV/cfg.tar.xz" q05cfg
  ls -l "$DEV"/m[0-9]* "$DEV/cfg.tar.xz"
}

for step in ${*:-sw model}; do
  case "$step" in
    sw) sw ;;
    model) model ;;
    *) echo "unknown step: $step"; exit 2 ;;
  esac
done
