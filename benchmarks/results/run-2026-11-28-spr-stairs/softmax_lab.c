/* The attention kernel's softmax pass alone, one thread, 16 rows x 4,096 scores in cache: ns per 16 values with the
 * exponential (mode 0), without it (1), without the bf16 store (2), two vectors a step (3; timing only).
 *     gcc -O2 -march=native -o sm softmax_lab.c -lm && for m in 0 1 2 3; do ./sm $m; done */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <math.h>
typedef __m512 vec;
static inline vec vexp(vec x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    vec n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vec r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x));
    vec p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    return _mm512_scalef_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f))), n);
}
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    int W = 4096, R = 16, mode = atoi(argv[1]);
    float *s = aligned_alloc(64, (size_t)R * W * 4); unsigned short *pb = aligned_alloc(64, (size_t)R * W * 2);
    for (int i = 0; i < R * W; i++) s[i] = (float)((i * 7919) % 1000) / 100.0f - 5.0f;
    const vec sc = _mm512_set1_ps(0.125f);
    float tot = 0; double best = 1e9;
    for (int rep = 0; rep < 50; rep++) {
        double t0 = now();
        for (int i = 0; i < R; i++) {
            float *sr = s + (size_t)i * W; unsigned short *pr = pb + (size_t)i * W;
            vec mx = _mm512_set1_ps(-INFINITY);
            for (int c = 0; c < W; c += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(sr + c));
            const vec m = _mm512_mul_ps(_mm512_set1_ps(_mm512_reduce_max_ps(mx)), sc);
            vec acc = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps();
            if (mode == 0) for (int c = 0; c < W; c += 16) {
                vec p = vexp(_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(sr + c), sc), m));
                acc = _mm512_add_ps(acc, p);
                _mm256_storeu_si256((__m256i *)(pr + c), (__m256i)_mm512_cvtneps_pbh(p));
            }
            if (mode == 1) for (int c = 0; c < W; c += 16) { /* no exp */
                vec p = _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(sr + c), sc), m);
                acc = _mm512_add_ps(acc, p);
                _mm256_storeu_si256((__m256i *)(pr + c), (__m256i)_mm512_cvtneps_pbh(p));
            }
            if (mode == 2) for (int c = 0; c < W; c += 16) { /* no store */
                vec p = vexp(_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(sr + c), sc), m));
                acc = _mm512_add_ps(acc, p);
            }
            if (mode == 3) for (int c = 0; c < W; c += 32) { /* two vectors a step: same bits per lane? no (acc order) - timing only */
                vec p = vexp(_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(sr + c), sc), m));
                vec p2 = vexp(_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(sr + c + 16), sc), m));
                acc = _mm512_add_ps(acc, p); acc2 = _mm512_add_ps(acc2, p2);
                _mm256_storeu_si256((__m256i *)(pr + c), (__m256i)_mm512_cvtneps_pbh(p));
                _mm256_storeu_si256((__m256i *)(pr + c + 16), (__m256i)_mm512_cvtneps_pbh(p2));
            }
            tot += _mm512_reduce_add_ps(_mm512_add_ps(acc, acc2));
        }
        double dt = now() - t0; if (dt < best) best = dt;
    }
    printf("mode %d: %.2f ns per vector (%.0f)\n", mode, best / (R * W / 16) * 1e9, tot);
}
