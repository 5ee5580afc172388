#include <immintrin.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>
typedef struct __attribute__((packed)) { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg_t;
int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    syscall(SYS_arch_prctl, 0x1023, 18);
    static char buf[64*1024] __attribute__((aligned(64)));
    memset(buf, 0, sizeof buf);
    for (int rep = 0; rep < 5; rep++) {
    double t0 = omp_get_wtime();
    long iters = 2000000;
    #pragma omp parallel num_threads(threads)
    {
        cfg_t c; memset(&c, 0, sizeof c); c.palette = 1;
        for (int t = 0; t < 8; t++) c.colsb[t] = 64, c.rows[t] = 16;
        _tile_loadconfig(&c);
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        _tile_loadd(4, buf, 64); _tile_loadd(5, buf + 1024, 64); _tile_loadd(6, buf+2048, 64); _tile_loadd(7, buf+3072, 64);
        for (long i = 0; i < iters; i++) {
            _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, buf + 8192 + 1024*omp_get_thread_num(), 64);
        _tile_release();
    }
    double dt = omp_get_wtime() - t0;
    printf("threads %d: %.2f TFLOPS total, %.2f ns per TDP per thread\n", threads, threads * iters * 4 * 16.0*16*32*2 / dt / 1e12, dt / (iters*4) * 1e9);
    }
}
