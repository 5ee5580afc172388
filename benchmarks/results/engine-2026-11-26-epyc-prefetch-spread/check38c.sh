#!/bin/bash
# Third call: the prefetch spread over a group's blocks (spread) against old / nopf / new, host Intel CPU, 2 cores.
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/tests
TL=$(python3 -c "import torch,pathlib;print(pathlib.Path(torch.__file__).parent/'lib')")
for v in old nopf new spread; do src=.gpu/cpu_gemm_$v.c; [ $v = new ] && src=src/foretell/engine/cpu_gemm.c; cc -O3 -march=native -fopenmp -shared -fPIC $src -o /tmp/$v.so -L$TL -Wl,-rpath,$TL || echo "build $v failed"; done
for r in 1 2; do echo "# round $r, cores 0,1"; OMP_NUM_THREADS=2 REPS=5 SHAPES=151936x896,4864x896,8960x1536 MS=1,16,93 timeout 130 taskset -c 0,1 python3 .gpu/gemm_cold.py /tmp/old.so /tmp/nopf.so /tmp/new.so /tmp/spread.so 2>&1 | grep -v -i warn; done | tee $OUT/gemm_cold_intel3.txt
