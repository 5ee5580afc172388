#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>
typedef unsigned short bf16;
typedef struct __attribute__((packed)) { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg_t;
static void cfg(void) { cfg_t c; memset(&c, 0, sizeof c); c.palette = 1; for (int t = 0; t < 8; t++) c.colsb[t] = 64, c.rows[t] = 16; _tile_loadconfig(&c); }
/* p[(mb KB + kb) 256 + r 16 + m] = pair x[16mb+m, 32kb+2r..] */
static void pack(const bf16 *x, int M, int K, uint32_t *p) {
    int KB = K / 32, tiles = (M + 15) / 16;
    for (int mb = 0; mb < tiles; mb++) for (int kb = 0; kb < KB; kb++) for (int r = 0; r < 16; r++) for (int m = 0; m < 16; m++) {
        int row = 16 * mb + m; uint32_t v = 0;
        if (row < M) memcpy(&v, x + (size_t)row * K + 32 * kb + 2 * r, 4);
        p[((size_t)mb * KB + kb) * 256 + r * 16 + m] = v;
    }
}
static inline void store(const float *buf, int mb, int M, int n0, int N, float *y) {
    for (int m = 0; m < 16 && 16 * mb + m < M; m++) for (int i = 0; i < 16; i++) y[(size_t)(16 * mb + m) * N + n0 + i] = buf[i * 16 + m];
}
#define PF 8
/* v0: the current kernel's loop */
static void v0_rows(const bf16 *w, int K, const uint32_t *xp, int tiles, int M, int n0, int N, float *y, float *buf) {
    int KB = K / 32; size_t step = (size_t)KB * 256;
    for (int mb0 = 0; mb0 < tiles; mb0 += 4) {
        int cnt = tiles - mb0 < 4 ? tiles - mb0 : 4;
        const uint32_t *x0 = xp + (size_t)mb0 * step;
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        for (int kb = 0; kb < KB; kb++) {
            const uint32_t *xb = x0 + (size_t)kb * 256;
            if (kb + PF < KB) for (int r = 0; r < 16; r++) _mm_prefetch((const char *)(w + (size_t)r * K + (size_t)(kb + PF) * 32), _MM_HINT_T0);
            _tile_loadd(4, w + (size_t)kb * 32, (long)K * 2);
            _tile_loadd(5, xb, 64); _tile_dpbf16ps(0, 4, 5);
            if (cnt > 1) { _tile_loadd(6, xb + step, 64); _tile_dpbf16ps(1, 4, 6); }
            if (cnt > 2) { _tile_loadd(7, xb + 2 * step, 64); _tile_dpbf16ps(2, 4, 7); }
            if (cnt > 3) { _tile_loadd(5, xb + 3 * step, 64); _tile_dpbf16ps(3, 4, 5); }
        }
        _tile_stored(0, buf, 64); if (cnt > 1) _tile_stored(1, buf + 256, 64); if (cnt > 2) _tile_stored(2, buf + 512, 64); if (cnt > 3) _tile_stored(3, buf + 768, 64);
        for (int j = 0; j < cnt; j++) store(buf + 256 * j, mb0 + j, M, n0, N, y);
    }
}
/* v0: the current kernel's loop */
/* v6-v8: v0 with inputs (6), weights (7) or both (8) read from the same two L1-resident steps: timing only */
static void vx_rows(int mode, const bf16 *w, int K, const uint32_t *xp, int tiles, int M, int n0, int N, float *y, float *buf) {
    int KB = K / 32; size_t step = (size_t)KB * 256;
    for (int mb0 = 0; mb0 < tiles; mb0 += 4) {
        int cnt = tiles - mb0 < 4 ? tiles - mb0 : 4;
        const uint32_t *x0 = xp + (size_t)mb0 * step;
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        for (int kb = 0; kb < KB; kb++) {
            const uint32_t *xb = (mode == 7 ? x0 + (size_t)kb * 256 : (mode == 6 ? x0 : xp) + (size_t)(kb & 1) * 256);
            if (kb + PF < KB) for (int r = 0; r < 16; r++) _mm_prefetch((const char *)(w + (size_t)r * K + (size_t)(kb + PF) * 32), _MM_HINT_T0);
            _tile_loadd(4, w + (size_t)(mode == 6 ? kb : kb & 1) * 32, (long)K * 2);
            _tile_loadd(5, xb, 64); _tile_dpbf16ps(0, 4, 5);
            if (cnt > 1) { _tile_loadd(6, xb + step, 64); _tile_dpbf16ps(1, 4, 6); }
            if (cnt > 2) { _tile_loadd(7, xb + 2 * step, 64); _tile_dpbf16ps(2, 4, 7); }
            if (cnt > 3) { _tile_loadd(5, xb + 3 * step, 64); _tile_dpbf16ps(3, 4, 5); }
        }
        _tile_stored(0, buf, 64); if (cnt > 1) _tile_stored(1, buf + 256, 64); if (cnt > 2) _tile_stored(2, buf + 512, 64); if (cnt > 3) _tile_stored(3, buf + 768, 64);
        for (int j = 0; j < cnt; j++) store(buf + 256 * j, mb0 + j, M, n0, N, y);
    }
}
/* v0: the current kernel's loop */
/* v1: 2 x 2: 32 weight rows (tiles 4, 5) x 2 input tiles (6, 7), C 0..3; loads ordered so each frees early */
static void v1_rows(const bf16 *w, int K, const uint32_t *xp, int tiles, int M, int n0, int N, float *y, float *buf) {
    int KB = K / 32; size_t step = (size_t)KB * 256;
    const bf16 *w1 = w + (size_t)16 * K;
    for (int mb0 = 0; mb0 < tiles; mb0 += 2) {
        int two = tiles - mb0 > 1;
        const uint32_t *x0 = xp + (size_t)mb0 * step;
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        for (int kb = 0; kb < KB; kb++) {
            const uint32_t *xb = x0 + (size_t)kb * 256;
            if (mb0 == 0 && kb + PF < KB) for (int r = 0; r < 32; r++) _mm_prefetch((const char *)(w + (size_t)r * K + (size_t)(kb + PF) * 32), _MM_HINT_T0);
            _tile_loadd(4, w + (size_t)kb * 32, (long)K * 2);
            _tile_loadd(6, xb, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(5, w1 + (size_t)kb * 32, (long)K * 2);
            _tile_dpbf16ps(2, 5, 6);
            if (two) { _tile_loadd(7, xb + step, 64); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(3, 5, 7); }
        }
        _tile_stored(0, buf, 64); _tile_stored(2, buf + 512, 64);
        if (two) { _tile_stored(1, buf + 256, 64); _tile_stored(3, buf + 768, 64); }
        store(buf, mb0, M, n0, N, y); store(buf + 512, mb0, M, n0 + 16, N, y);
        if (two) { store(buf + 256, mb0 + 1, M, n0, N, y); store(buf + 768, mb0 + 1, M, n0 + 16, N, y); }
    }
}
/* v1: 2 x 2: 32 weight rows (tiles 4, 5) x 2 input tiles (6, 7), C 0..3; loads ordered so each frees early */
static void v9_rows(const bf16 *w, int K, const uint32_t *xp, int tiles, int M, int n0, int N, float *y, float *buf) {
    int KB = K / 32; size_t step = (size_t)KB * 256;
    const bf16 *w1 = w + (size_t)16 * K;
    for (int mb0 = 0; mb0 < tiles; mb0 += 2) {
        int two = tiles - mb0 > 1;
        const uint32_t *x0 = xp + (size_t)mb0 * step;
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        for (int kb = 0; kb < KB; kb++) {
            const uint32_t *xb = x0 + (size_t)kb * 256;
            if (kb + PF < KB) for (int r = 0; r < 32; r++) _mm_prefetch((const char *)(w + (size_t)r * K + (size_t)(kb + PF) * 32), _MM_HINT_T0);
            _tile_loadd(4, w + (size_t)kb * 32, (long)K * 2);
            _tile_loadd(6, xb, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(5, w1 + (size_t)kb * 32, (long)K * 2);
            _tile_dpbf16ps(2, 5, 6);
            if (two) { _tile_loadd(7, xb + step, 64); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(3, 5, 7); }
        }
        _tile_stored(0, buf, 64); _tile_stored(2, buf + 512, 64);
        if (two) { _tile_stored(1, buf + 256, 64); _tile_stored(3, buf + 768, 64); }
        store(buf, mb0, M, n0, N, y); store(buf + 512, mb0, M, n0 + 16, N, y);
        if (two) { store(buf + 256, mb0 + 1, M, n0, N, y); store(buf + 768, mb0 + 1, M, n0 + 16, N, y); }
    }
}
/* v2: weights pre-packed per block of 16 rows in tile order (contiguous 1 KB per kb), else v1 */
static void v2_rows(const bf16 *wp, int K, const uint32_t *xp, int tiles, int M, int n0, int N, float *y, float *buf) {
    /* wp: block of 32 rows packed: [kb][2][16 rows][32 values] */
    int KB = K / 32; size_t step = (size_t)KB * 256;
    for (int mb0 = 0; mb0 < tiles; mb0 += 2) {
        int two = tiles - mb0 > 1;
        const uint32_t *x0 = xp + (size_t)mb0 * step;
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        for (int kb = 0; kb < KB; kb++) {
            const uint32_t *xb = x0 + (size_t)kb * 256;
            const bf16 *a = wp + (size_t)kb * 1024;
            if (mb0 == 0 && kb + PF < KB) for (int r = 0; r < 32; r++) _mm_prefetch((const char *)(a + PF * 1024 + r * 32), _MM_HINT_T0);
            _tile_loadd(4, a, 64);
            _tile_loadd(6, xb, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(5, a + 512, 64);
            _tile_dpbf16ps(2, 5, 6);
            if (two) { _tile_loadd(7, xb + step, 64); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(3, 5, 7); }
        }
        _tile_stored(0, buf, 64); _tile_stored(2, buf + 512, 64);
        if (two) { _tile_stored(1, buf + 256, 64); _tile_stored(3, buf + 768, 64); }
        store(buf, mb0, M, n0, N, y); store(buf + 512, mb0, M, n0 + 16, N, y);
        if (two) { store(buf + 256, mb0 + 1, M, n0, N, y); store(buf + 768, mb0 + 1, M, n0 + 16, N, y); }
    }
}
static double run(int v, const bf16 *w, const bf16 *wp, const uint32_t *xp, int M, int N, int K, float *y, int threads) {
    int tiles = (M + 15) / 16;
    double t0 = omp_get_wtime();
    #pragma omp parallel num_threads(threads)
    {
        float buf[1024] __attribute__((aligned(64)));
        cfg();
        if (v == 0) {
            #pragma omp for schedule(static)
            for (int blk = 0; blk < N / 16; blk++) v0_rows(w + (size_t)blk * 16 * K, K, xp, tiles, M, blk * 16, N, y, buf);
        } else if (v == 1) {
            #pragma omp for schedule(static)
            for (int blk = 0; blk < N / 32; blk++) v1_rows(w + (size_t)blk * 32 * K, K, xp, tiles, M, blk * 32, N, y, buf);
        } else if (v == 9) {
            #pragma omp for schedule(static)
            for (int blk = 0; blk < N / 32; blk++) v9_rows(w + (size_t)blk * 32 * K, K, xp, tiles, M, blk * 32, N, y, buf);
        } else if (v >= 6) {
            #pragma omp for schedule(static)
            for (int blk = 0; blk < N / 16; blk++) vx_rows(v, w + (size_t)blk * 16 * K, K, xp, tiles, M, blk * 16, N, y, buf);
        } else {
            #pragma omp for schedule(static)
            for (int blk = 0; blk < N / 32; blk++) v2_rows(wp + (size_t)blk * 32 * K, K, xp, tiles, M, blk * 32, N, y, buf);
        }
        _tile_release();
    }
    return omp_get_wtime() - t0;
}

static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    int N = atoi(argv[1]), K = atoi(argv[2]), M = atoi(argv[3]), threads = 2, pairs = argc > 4 ? atoi(argv[4]) : 60;
    int copies = argc > 5 ? atoi(argv[5]) : 16, va = argc > 6 ? atoi(argv[6]) : 0, vb = argc > 7 ? atoi(argv[7]) : 1;
    syscall(SYS_arch_prctl, 0x1023, 18);
    bf16 *w = aligned_alloc(64, (size_t)copies * N * K * 2), *wp = aligned_alloc(64, (size_t)copies * N * K * 2);
    bf16 *x = aligned_alloc(64, (size_t)M * K * 2);
    srand(1);
    for (size_t i = 0; i < (size_t)copies * N * K; i++) { float f = ((rand() % 2001) - 1000) / 50000.0f; uint32_t u; memcpy(&u, &f, 4); w[i] = u >> 16; }
    for (size_t i = 0; i < (size_t)M * K; i++) { float f = ((rand() % 2001) - 1000) / 1000.0f; uint32_t u; memcpy(&u, &f, 4); x[i] = u >> 16; }
    int KB = K / 32;
    for (int c = 0; c < copies; c++) for (int blk = 0; blk < N / 32; blk++) for (int kb = 0; kb < KB; kb++) for (int h = 0; h < 2; h++) for (int r = 0; r < 16; r++)
        memcpy(wp + (size_t)c * N * K + (size_t)blk * 32 * K + (size_t)kb * 1024 + h * 512 + r * 32, w + (size_t)c * N * K + (size_t)(blk * 32 + h * 16 + r) * K + kb * 32, 64);
    int tiles = (M + 15) / 16;
    uint32_t *xp = aligned_alloc(64, (size_t)tiles * KB * 1024);
    pack(x, M, K, xp);
    float *ya = aligned_alloc(64, (size_t)M * N * 4), *yb = aligned_alloc(64, (size_t)M * N * 4);
    double *ra = malloc(sizeof(double) * pairs * copies), *rb = malloc(sizeof(double) * pairs * copies), *rr = malloc(sizeof(double) * pairs * copies);
    int n = 0;
    for (int r = 0; r < pairs; r++) for (int c = 0; c < copies; c++) {
        double ta, tb;
        if ((r + c) & 1) { tb = run(vb, w + (size_t)c * N * K, wp + (size_t)c * N * K, xp, M, N, K, yb, threads); ta = run(va, w + (size_t)c * N * K, wp + (size_t)c * N * K, xp, M, N, K, ya, threads); }
        else { ta = run(va, w + (size_t)c * N * K, wp + (size_t)c * N * K, xp, M, N, K, ya, threads); tb = run(vb, w + (size_t)c * N * K, wp + (size_t)c * N * K, xp, M, N, K, yb, threads); }
        ra[n] = ta; rb[n] = tb; rr[n] = tb / ta; n++;
    }
    qsort(ra, n, sizeof(double), cmpd); qsort(rb, n, sizeof(double), cmpd); qsort(rr, n, sizeof(double), cmpd);
    printf("N=%d K=%d M=%d: v%d median %.3f ms (min %.3f) | v%d median %.3f ms (min %.3f) | paired ratio median %.3f (q25 %.3f q75 %.3f) same=%d\n",
           N, K, M, va, ra[n / 2] * 1e3, ra[0] * 1e3, vb, rb[n / 2] * 1e3, rb[0] * 1e3, rr[n / 2], rr[n / 4], rr[3 * n / 4], memcmp(ya, yb, (size_t)M * N * 4) == 0);
}
