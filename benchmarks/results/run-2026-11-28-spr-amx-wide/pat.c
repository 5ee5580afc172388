#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>
typedef struct __attribute__((packed)) { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg_t;
static char buf[2][16384] __attribute__((aligned(64)));
#define L(t, i) _tile_loadd(t, B + ((i) & 15) * 1024, 64)
#define D(c, a, b) _tile_dpbf16ps(c, a, b)
int main(int argc, char **argv) {
    int pat = atoi(argv[1]);
    syscall(SYS_arch_prctl, 0x1023, 18);
    long iters = 200000;
    for (int rep = 0; rep < 3; rep++) {
    double t0 = omp_get_wtime(); long tdps = 0;
    #pragma omp parallel num_threads(2) reduction(+:tdps)
    {
        char *B = buf[omp_get_thread_num()];
        cfg_t c; memset(&c, 0, sizeof c); c.palette = 1;
        for (int t = 0; t < 8; t++) c.colsb[t] = 64, c.rows[t] = 16;
        _tile_loadconfig(&c);
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3); _tile_zero(4); _tile_zero(5); _tile_zero(6); _tile_zero(7);
        for (long i = 0; i < iters; i++) {
            switch (pat) {
            case 1: /* v0: 1W x 4X, tile 5 reused */
                L(4, 0); L(5, 1); D(0, 4, 5); L(6, 2); D(1, 4, 6); L(7, 3); D(2, 4, 7); L(5, 4); D(3, 4, 5); tdps += 4; break;
            case 2: /* 2x2 */
                L(4, 0); L(6, 1); D(0, 4, 6); L(5, 2); D(2, 5, 6); L(7, 3); D(1, 4, 7); D(3, 5, 7); tdps += 4; break;
            case 3: /* 1W x 3X, no reuse */
                L(3, 0); L(4, 1); D(0, 3, 4); L(5, 2); D(1, 3, 5); L(6, 3); D(2, 3, 6); tdps += 3; break;
            case 4: /* 1W x 2X double-buffered over two steps */
                L(2, 0); L(4, 1); D(0, 2, 4); L(5, 2); D(1, 2, 5);
                L(3, 3); L(6, 4); D(0, 3, 6); L(7, 5); D(1, 3, 7); tdps += 4; break;
            case 5: /* 2x2, loads of the next step first? same as 2 but ordered W0,W1,X0,X1 */
                L(4, 0); L(5, 1); L(6, 2); L(7, 3); D(0, 4, 6); D(1, 4, 7); D(2, 5, 6); D(3, 5, 7); tdps += 4; break;
            case 6: /* 4 C, no loads (peak) */
                D(0, 4, 6); D(1, 4, 7); D(2, 5, 6); D(3, 5, 7); tdps += 4; break;
            case 7: /* 1W x 1X per step, 2 acc, double-buffered: C0 C1, W 2/3, X 4/5 */
                L(2, 0); L(4, 1); D(0, 2, 4); L(3, 2); L(5, 3); D(1, 3, 5); tdps += 2; break;
            case 8: /* 2x2 with only the X loads (W stationary) */
                L(6, 1); D(0, 4, 6); D(2, 5, 6); L(7, 3); D(1, 4, 7); D(3, 5, 7); tdps += 4; break;
            case 10: /* 3 TDPs on fixed sources (C0-2, 4,5,6) + 1 load into unused tile 7 */
                L(7, 0); D(0, 4, 5); D(1, 4, 6); D(2, 5, 6); tdps += 3; break;
            case 11: /* loads only, into 2 tiles alternating */
                L(6, 0); L(7, 1); tdps += 2; break;
            case 12: /* loads only, into 1 tile */
                L(7, 0); tdps += 1; break;
            case 13: /* 3 TDPs + 2 loads into unused */
                L(7, 0); D(0, 4, 5); L(3, 1); D(1, 4, 6); D(2, 5, 6); tdps += 3; break;
            case 14: /* 1W x 2X, two operand sets, software pipelined */
                L(3, 0); L(6, 1); L(7, 2); D(0, 2, 4); D(1, 2, 5);
                L(2, 3); L(4, 4); L(5, 5); D(0, 3, 6); D(1, 3, 7); tdps += 4; break;
            case 15: /* 2x2, each register reloaded right after its last reader */
                D(0, 4, 6); D(1, 4, 7); L(4, 0); D(2, 5, 6); L(6, 1); D(3, 5, 7); L(5, 2); L(7, 3); tdps += 4; break;
            case 16: /* 2x2 like 15, but loads for W0 issued after 2 TDPs, etc. different order */
                D(0, 4, 6); D(2, 5, 6); L(6, 1); D(1, 4, 7); L(4, 0); D(3, 5, 7); L(5, 2); L(7, 3); tdps += 4; break;
            case 17: /* 3 acc: 1W x 3X? no: 3 C with W rotating in 2 regs and X stationary-ish: C0-2, W 3/4, X 5,6,7 loaded every other */
                L(4, 0); D(0, 3, 5); D(1, 3, 6); D(2, 3, 7); L(3, 1); L(5, 2); D(0, 4, 5); D(1, 4, 6); D(2, 4, 7); L(6, 3); L(7, 4); tdps += 6; break;
            case 9: /* 3 acc, 1 W, 3 X via 4 regs rotating: C0-2, W 3, X 4,5,6,7 rotate */
                L(3, 0); L(4, 1); D(0, 3, 4); L(5, 2); D(1, 3, 5); L(6, 3); D(2, 3, 6); L(7, 4);
                L(3, 5); D(0, 3, 7); L(4, 6); D(1, 3, 4); L(5, 7); D(2, 3, 5); tdps += 6; break;
            }
        }
        _tile_release();
    }
    double dt = omp_get_wtime() - t0;
    printf("pattern %d: %.1f ns per TDP per thread, %.2f TFLOPS total\n", pat, dt / (tdps / 2) * 1e9, tdps * 16.0 * 16 * 32 * 2 / dt / 1e12);
    }
}
