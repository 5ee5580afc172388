#!/bin/bash
# One device call (2026-11-26, 5th lease): GGUF blocks on the host's Intel CPU (tests, bf16 vs blocks per call), then the CUDA tests.
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/tests
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/transformers-*.whl .whl/platformdirs-*.whl .whl/gguf-*.whl || exit 1
{ date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch,transformers,gguf;print(torch.__version__,transformers.__version__)"; lscpu | grep -E "Model name|^CPU\(s\)"; lscpu | grep -o -E "amx\w*|avx512_bf16|avx512f" | sort -u | tr '\n' ' '; echo; } 2>&1 | tee $OUT/env.txt
TL=$(python3 -c "import torch,pathlib;print(pathlib.Path(torch.__file__).parent/'lib')")
cc -O3 -march=native -fopenmp -shared -fPIC src/foretell/engine/cpu_gemm.c -o /tmp/new.so -L$TL -Wl,-rpath,$TL || echo "build failed"
OMP_NUM_THREADS=2 timeout 200 taskset -c 0,1 python3 .gpu/qbench_rand.py /tmp/new.so 2>&1 | grep -v -i warn | tee $OUT/blocks_intel.txt
OMP_NUM_THREADS=2 timeout 150 taskset -c 2,3 python3 -m pytest -q -p no:cacheprovider tests/test_gguf_blocks.py tests/test_cpu_gemm.py tests/test_exact.py > $OUT/cpu_tests_intel.txt 2>&1; echo "cpu tests rc $?"; tail -4 $OUT/cpu_tests_intel.txt
timeout 120 python3 -m pytest -q -p no:cacheprovider --durations=5 tests/test_cuda.py > $OUT/test_cuda.txt 2>&1; echo "cuda tests rc $?"; tail -4 $OUT/test_cuda.txt
