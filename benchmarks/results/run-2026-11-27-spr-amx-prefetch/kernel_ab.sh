#!/bin/sh
# The AMX GEMM without (v1, ec161e4) and with (v2) the weight rows' prefetch, interleaved in one process on
# bf16 weights in 8 copies (cold, as in a pass). Usage: sh kernel_ab.sh N K THREADS (e.g. 4864 896 2).
set -e
dir=$(mktemp -d)
git show ec161e4:src/foretell/engine/cpu_gemm.c > "$dir/k.c"
python3 - "$dir" <<'PY'
import sys
d = sys.argv[1]
src = open(f"{d}/k.c").read()
start = src.index("static void amx_rows(")
end = src.index("/* ---- attention for the queries that need logits, on AMX tiles")
v2 = src[start:end].replace("amx_rows(", "amx_rows_v2(").replace("foretell_linear_amx(", "foretell_linear_amx_v2(")
old = "            _tile_loadd(4, w + (size_t)kb * 32, (long)K * 2);"
v2 = v2.replace(old, "            if (kb + 8 < KB) for (int r = 0; r < 16; r++) _mm_prefetch((const char *)(w + (size_t)r * K + (size_t)(kb + 8) * 32), _MM_HINT_T0);\n" + old)
open(f"{d}/kv.c", "w").write(src[:end] + v2 + src[end:])
PY
cat > "$dir/main.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
typedef uint16_t bf16;
int foretell_amx_init(void);
int foretell_linear_amx(const bf16 *, const bf16 *, const uint8_t *, int, const float *, void *, int, int, int, int, int);
int foretell_linear_amx_v2(const bf16 *, const bf16 *, const uint8_t *, int, const float *, void *, int, int, int, int, int);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
  int N = atoi(argv[1]), K = atoi(argv[2]), th = atoi(argv[3]);
  foretell_amx_init();
  int copies = (int)(600e6 / ((double)N * K * 2)); if (copies > 8) copies = 8; if (copies < 1) copies = 1;
  bf16 *w = aligned_alloc(64, (size_t)copies * N * K * 2), *x = aligned_alloc(64, 256 * (size_t)K * 2);
  for (size_t i = 0; i < (size_t)copies * N * K; i++) w[i] = 0x3f80 ^ (rand() & 0x807f);
  for (size_t i = 0; i < 256 * (size_t)K; i++) x[i] = 0x3f80 ^ (rand() & 0x807f);
  float *y = aligned_alloc(64, 256 * (size_t)N * 4), *y2 = aligned_alloc(64, 256 * (size_t)N * 4);
  int Ms[] = {1, 16, 32, 48, 64, 96, 128};
  for (int mi = 0; mi < 7; mi++) { int M = Ms[mi]; double b1 = 1e9, b2 = 1e9;
    for (int r = 0; r < 40; r++) { const bf16 *wc = w + (size_t)(r % copies) * N * K;
      double t = now(); foretell_linear_amx(x, wc, 0, 0, 0, y, M, N, K, th, 0); double d = now() - t; if (d < b1) b1 = d;
      t = now(); foretell_linear_amx_v2(x, wc, 0, 0, 0, y2, M, N, K, th, 0); d = now() - t; if (d < b2) b2 = d; }
    printf("M%d: %.3f -> %.3f ms%s\n", M, b1 * 1e3, b2 * 1e3, memcmp(y, y2, (size_t)M * N * 4) ? "  BITS DIFFER" : ""); }
  return 0;
}
C
gcc -O3 -march=native -fopenmp "$dir/kv.c" "$dir/main.c" -o "$dir/ab"
"$dir/ab" "$@"
