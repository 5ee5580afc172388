#!/bin/bash
# Second call: the prefetch on the host's Intel CPU, old / new without prefetch_part / new, more rounds.
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/tests
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/transformers-*.whl .whl/platformdirs-*.whl || exit 1
lscpu -e | head -20 | tee $OUT/topology.txt
TL=$(python3 -c "import torch,pathlib;print(pathlib.Path(torch.__file__).parent/'lib')")
for v in old nopf new; do src=.gpu/cpu_gemm_$v.c; [ $v = new ] && src=src/foretell/engine/cpu_gemm.c; cc -O3 -march=native -fopenmp -shared -fPIC $src -o /tmp/$v.so -L$TL -Wl,-rpath,$TL || echo "build $v failed"; done
for cores in 0,1 0,8; do echo "# cores $cores"; OMP_NUM_THREADS=2 REPS=6 SHAPES=151936x896,4864x896 MS=1,16,93 timeout 120 taskset -c $cores python3 .gpu/gemm_cold.py /tmp/old.so /tmp/nopf.so /tmp/new.so 2>&1 | grep -v -i warn; done | tee $OUT/gemm_cold_intel2.txt
OMP_NUM_THREADS=2 timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_exact.py -k from_config_runs_exact > $OUT/exact_fix.txt 2>&1; tail -2 $OUT/exact_fix.txt
