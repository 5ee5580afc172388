// Q8_0 units in isolation (data in L1/L2, one thread): the kernel order ("cur": an input group in registers, each
// weight row's 16 vectors read from L1) against R weight rows x C input rows a vector at a time (tRC).
//   gcc -O3 -march=native q8_tiles_unit.c -o q8_tiles_unit && ./q8_tiles_unit M R
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <stdint.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
enum { G = 4 };
static int8_t *VT, *ST, *X; static float *WS, *DX, *ACC;
static void cur(int R, int M) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int r0 = 0; r0 < R; r0 += 4)
  for (int m = 0; m < M; m++) {
    __m256 a[4] = {0};
    for (int g = 0; g < G; g++) {
      const int8_t *x = X + ((size_t)m * G + g) * 256;
      __m256i xv[8]; for (int j = 0; j < 8; j++) xv[j] = _mm256_load_si256((const __m256i *)(x + 32 * j));
      for (int r = 0; r < 4; r++) {
        const int8_t *vt = VT + ((size_t)(r0 + r) * G + g) * 256, *st = ST + ((size_t)(r0 + r) * G + g) * 256;
        __m256i p[8];
        for (int j = 0; j < 8; j++) p[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)(vt + 32 * j)), _mm256_sign_epi8(xv[j], _mm256_load_si256((const __m256i *)(st + 32 * j)))), ones);
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(p[0], p[1]), _mm256_add_epi32(p[2], p[3])), _mm256_add_epi32(_mm256_add_epi32(p[4], p[5]), _mm256_add_epi32(p[6], p[7])));
        a[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(_mm256_loadu_ps(WS + ((size_t)(r0 + r) * G + g) * 8), _mm256_loadu_ps(DX + ((size_t)m * G + g) * 8)), a[r]);
      }
    }
    for (int r = 0; r < 4; r++) _mm256_store_ps(ACC + ((size_t)(r0 + r) * M + m) * 8, a[r]);
  }
}
#define TILE(NAME, RT, CT) \
static void NAME(int R, int M) { \
  const __m256i ones = _mm256_set1_epi16(1); \
  for (int r0 = 0; r0 < R; r0 += RT) \
   for (int m0 = 0; m0 < M; m0 += CT) { \
    __m256 f[RT][CT]; \
    for (int r = 0; r < RT; r++) for (int c = 0; c < CT; c++) f[r][c] = _mm256_setzero_ps(); \
    for (int g = 0; g < G; g++) { \
      const int8_t *vt[RT], *st[RT], *x[CT]; \
      for (int r = 0; r < RT; r++) { vt[r] = VT + ((size_t)(r0 + r) * G + g) * 256; st[r] = ST + ((size_t)(r0 + r) * G + g) * 256; } \
      for (int c = 0; c < CT; c++) x[c] = X + ((size_t)(m0 + c) * G + g) * 256; \
      __m256i s[RT][CT]; \
      for (int j = 0; j < 8; j++) { \
        __m256i xv[CT]; \
        for (int c = 0; c < CT; c++) xv[c] = _mm256_load_si256((const __m256i *)(x[c] + 32 * j)); \
        for (int r = 0; r < RT; r++) { \
          const __m256i v = _mm256_load_si256((const __m256i *)(vt[r] + 32 * j)), sg = _mm256_load_si256((const __m256i *)(st[r] + 32 * j)); \
          for (int c = 0; c < CT; c++) { \
            const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(v, _mm256_sign_epi8(xv[c], sg)), ones); \
            s[r][c] = j == 0 ? p : _mm256_add_epi32(s[r][c], p); \
          } \
        } \
      } \
      for (int r = 0; r < RT; r++) for (int c = 0; c < CT; c++) \
        f[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r][c]), _mm256_mul_ps(_mm256_loadu_ps(WS + ((size_t)(r0 + r) * G + g) * 8), _mm256_loadu_ps(DX + ((size_t)(m0 + c) * G + g) * 8)), f[r][c]); \
    } \
    for (int r = 0; r < RT; r++) for (int c = 0; c < CT; c++) _mm256_store_ps(ACC + ((size_t)(r0 + r) * M + m0 + c) * 8, f[r][c]); \
  } \
}
TILE(t22, 2, 2)
TILE(t23, 2, 3)
TILE(t32, 3, 2)
TILE(t14, 1, 4)
TILE(t16, 1, 6)
TILE(t13, 1, 3)
TILE(t24, 2, 4)
TILE(t12, 1, 2)
int main(int argc, char **argv) {
  int R = argc > 2 ? atoi(argv[2]) : 12, M = argc > 1 ? atoi(argv[1]) : 24;
  VT = aligned_alloc(64, (size_t)R * G * 256); ST = aligned_alloc(64, (size_t)R * G * 256); X = aligned_alloc(64, (size_t)M * G * 256);
  WS = aligned_alloc(64, (size_t)R * G * 32); DX = aligned_alloc(64, (size_t)M * G * 32);
  ACC = aligned_alloc(64, (size_t)R * M * 32);
  for (size_t i = 0; i < (size_t)R * G * 256; i++) { ST[i] = (rand() % 255) - 127; VT[i] = abs(ST[i]); }
  for (size_t i = 0; i < (size_t)M * G * 256; i++) X[i] = (rand() % 255) - 127;
  for (size_t i = 0; i < (size_t)R * G * 8; i++) WS[i] = 0.01f;
  for (size_t i = 0; i < (size_t)M * G * 8; i++) DX[i] = 0.02f;
  struct { const char *n; void (*f)(int, int); int r, c; } v[] = {{"cur", cur, 4, 1}, {"t22", t22, 2, 2}, {"t23", t23, 2, 3}, {"t32", t32, 3, 2}, {"t14", t14, 1, 4}, {"t16", t16, 1, 6}, {"t13", t13, 1, 3}, {"t24", t24, 2, 4}, {"t12", t12, 1, 2}};
  float ref = 0;
  for (int k = 0; k < 9; k++) { if (R % v[k].r || M % v[k].c) continue;
    double best = 1e9; float chk = 0;
    for (int rep = 0; rep < 5; rep++) {
      int it = 20000000 / (R * M * G) + 1;
      double t0 = now(); for (int i = 0; i < it; i++) v[k].f(R, M); double t = (now() - t0) / it / (R * M * G);
      if (t < best) best = t;
      chk = ACC[5] + ACC[(size_t)R * M * 8 - 3];
    }
    if (k == 0) ref = chk;
    printf("%s M=%d R=%d: %.2f ns/unit (%.1f cyc)  %s\n", v[k].n, M, R, best * 1e9, best*2.9e9, chk == ref ? "same" : "DIFF");
  }
}
