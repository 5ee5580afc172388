// A unit: one weight row's 256-value group (transposed: 8 vectors) against one input row's group (8 vectors), Q5_0's
// integer sums and float epilogue; data in L1/L2, one thread. "cur": the kernel's order (an input group in registers,
// each weight row's read from L1); tRC: R weight rows x C input rows, a block at a time, the int16 sums in registers.
//     gcc -O3 -march=native unit.c -o unit && ./unit M R      (R: 12 by default; tiles that do not divide R or M skip)
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <stdint.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
enum { G = 4 };  // groups per row
static int8_t *W, *X; static float *WS, *DX, *ACC; static int32_t *OFF;
// current style: xv in registers, for each r: p_j = maddubs(vt_r[j], xv[j]); tree add; widen; epilogue
static void cur(int R, int M) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int g = 0; g < G; g++)
    for (int m = 0; m < M; m++) {
      const int8_t *x = X + ((size_t)m * G + g) * 256;
      __m256i xv[8]; for (int j = 0; j < 8; j++) xv[j] = _mm256_load_si256((const __m256i *)(x + 32 * j));
      for (int r = 0; r < R; r++) {
        const int8_t *w = W + ((size_t)r * G + g) * 256;
        __m256i p[8];
        for (int j = 0; j < 8; j++) p[j] = _mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)(w + 32 * j)), xv[j]);
        const __m256i a = _mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[2], p[3]));
        const __m256i b = _mm256_add_epi16(_mm256_add_epi16(p[4], p[5]), _mm256_add_epi16(p[6], p[7]));
        __m256i sum = _mm256_add_epi32(_mm256_madd_epi16(a, ones), _mm256_madd_epi16(b, ones));
        sum = _mm256_add_epi32(sum, _mm256_loadu_si256((const __m256i *)(OFF + ((size_t)m * G + g) * 8)));
        float *acc = ACC + ((size_t)r * M + m) * 8;
        _mm256_store_ps(acc, _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(_mm256_loadu_ps(WS + ((size_t)r * G + g) * 8), _mm256_loadu_ps(DX + ((size_t)m * G + g) * 8)), _mm256_load_ps(acc)));
      }
    }
}
// tile: RT weight rows x CT input rows, j outer, int16 accumulators in registers, x from memory operands
#define TILE(NAME, RT, CT) \
static void NAME(int R, int M) { \
  const __m256i ones = _mm256_set1_epi16(1); \
  for (int r0 = 0; r0 < R; r0 += RT) \
   for (int m0 = 0; m0 < M; m0 += CT) \
    for (int g = 0; g < G; g++) { \
      const int8_t *w[RT], *x[CT]; \
      for (int r = 0; r < RT; r++) w[r] = W + ((size_t)(r0 + r) * G + g) * 256; \
      for (int c = 0; c < CT; c++) x[c] = X + ((size_t)(m0 + c) * G + g) * 256; \
      __m256i s32[RT][CT]; \
      for (int h = 0; h < 2; h++) { \
        __m256i a[RT][CT]; \
        for (int j = 4 * h; j < 4 * h + 4; j++) { \
          for (int r = 0; r < RT; r++) { \
            const __m256i wv = _mm256_load_si256((const __m256i *)(w[r] + 32 * j)); \
            for (int c = 0; c < CT; c++) { \
              const __m256i p = _mm256_maddubs_epi16(wv, _mm256_load_si256((const __m256i *)(x[c] + 32 * j))); \
              a[r][c] = j == 4 * h ? p : _mm256_add_epi16(a[r][c], p); \
            } \
          } \
        } \
        for (int r = 0; r < RT; r++) for (int c = 0; c < CT; c++) { \
          const __m256i q = _mm256_madd_epi16(a[r][c], ones); \
          s32[r][c] = h ? _mm256_add_epi32(s32[r][c], q) : q; } \
      } \
      for (int r = 0; r < RT; r++) for (int c = 0; c < CT; c++) { \
        const int m = m0 + c; \
        __m256i sum = _mm256_add_epi32(s32[r][c], _mm256_loadu_si256((const __m256i *)(OFF + ((size_t)m * G + g) * 8))); \
        float *acc = ACC + ((size_t)(r0 + r) * M + m) * 8; \
        _mm256_store_ps(acc, _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(_mm256_loadu_ps(WS + ((size_t)(r0 + r) * G + g) * 8), _mm256_loadu_ps(DX + ((size_t)m * G + g) * 8)), _mm256_load_ps(acc))); \
      } \
    } \
}
TILE(t22, 2, 2)
TILE(t23, 2, 3)
TILE(t24, 2, 4)
TILE(t32, 3, 2)
TILE(t42, 4, 2)
TILE(t33, 3, 3)
TILE(t14, 1, 4)
int main(int argc, char **argv) {
  int R = argc > 2 ? atoi(argv[2]) : 12, M = argc > 1 ? atoi(argv[1]) : 24;
  W = aligned_alloc(64, (size_t)R * G * 256); X = aligned_alloc(64, (size_t)M * G * 256);
  WS = aligned_alloc(64, (size_t)R * G * 32); DX = aligned_alloc(64, (size_t)M * G * 32); OFF = aligned_alloc(64, (size_t)M * G * 32);
  ACC = aligned_alloc(64, (size_t)R * M * 32);
  for (size_t i = 0; i < (size_t)R * G * 256; i++) W[i] = rand() & 31;
  for (size_t i = 0; i < (size_t)M * G * 256; i++) X[i] = (rand() % 255) - 127;
  for (size_t i = 0; i < (size_t)R * G * 8; i++) WS[i] = 0.01f;
  for (size_t i = 0; i < (size_t)M * G * 8; i++) { DX[i] = 0.02f; OFF[i] = 3; }
  struct { const char *n; void (*f)(int, int); } v[] = {{"cur", cur}, {"t22", t22}, {"t23", t23}, {"t24", t24}, {"t32", t32}, {"t42", t42}, {"t33", t33}, {"t14", t14}};
  static const int tr[8] = {1, 2, 2, 2, 3, 4, 3, 1}, tc[8] = {1, 2, 3, 4, 2, 2, 3, 4};
  for (int k = 0; k < 8; k++) { if (R % tr[k] || M % tc[k]) continue;
    double best = 1e9; float chk = 0;
    for (int rep = 0; rep < 5; rep++) {
      for (size_t i = 0; i < (size_t)R * M * 8; i++) ACC[i] = 0;
      int it = 20000000 / (R * M * G) + 1;
      double t0 = now(); for (int i = 0; i < it; i++) v[k].f(R, M); double t = (now() - t0) / it / (R * M * G);
      if (t < best) best = t;
      chk = ACC[5];
    }
    printf("%s M=%d: %.2f ns/unit  %.1f GMAC/s  (%g)\n", v[k].n, M, best * 1e9, 256 / best / 1e9, chk);
  }
}
