#!/bin/bash
# Alternates kernel harness builds (amx_kernel_harness.c linked to variants of cpu_gemm.c) five rounds per shape;
# prints the median TFLOPS of each and the set of output hashes (one hash = the same bits).
# usage: cmp.sh "shapes..." bin1 bin2 ... ; alternates 5 rounds, prints median TF per bin per shape
shapes="$1"; shift
for a in $shapes; do
  a=${a//,/ }
  for b in "$@"; do echo -n > /tmp/amxt/r_$b; done
  for r in 1 2 3 4 5; do for b in "$@"; do ./$b $a 2 0.25 | awk '{print $(NF-3), $NF}' >> /tmp/amxt/r_$b; done; done
  line="$a:"
  for b in "$@"; do med=$(awk '{print $1}' /tmp/amxt/r_$b | sort -n | sed -n 3p); h=$(awk '{print $2}' /tmp/amxt/r_$b | sort -u | tr '\n' ' '); line="$line  $b $med [$h]"; done
  echo "$line"
done
