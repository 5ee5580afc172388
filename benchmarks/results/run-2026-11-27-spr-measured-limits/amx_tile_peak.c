/* TDPBF16PS throughput on one vCPU: tiles in registers, then 2x2 and 1x4 with operands loaded from L1.
 * gcc -O2 -march=native amx_tile_peak.c -o peak && taskset -c 0 ./peak */
#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
typedef struct __attribute__((packed)) { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg;
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  syscall(SYS_arch_prctl, 0x1023, 18);
  cfg c; memset(&c,0,sizeof c); c.palette=1; for(int t=0;t<8;t++){c.colsb[t]=64;c.rows[t]=16;}
  _tile_loadconfig(&c);
  static uint16_t a[16*32] __attribute__((aligned(64))), b[16*32] __attribute__((aligned(64)));
  for(int i=0;i<512;i++){a[i]=0x3f80;b[i]=0x3f80;}
  _tile_loadd(4,a,64);_tile_loadd(5,b,64);_tile_loadd(6,b,64);_tile_loadd(7,a,64);
  _tile_zero(0);_tile_zero(1);_tile_zero(2);_tile_zero(3);
  long n=20000000; double t=now();
  for(long i=0;i<n;i++){ _tile_dpbf16ps(0,4,5); _tile_dpbf16ps(1,4,6); _tile_dpbf16ps(2,7,5); _tile_dpbf16ps(3,7,6);}
  double dt=now()-t;
  printf("regs only: %.3f TFLOPS/core (%.1f ns per dp)\n", 4.0*n*16*16*32*2/dt/1e12, dt/(4.0*n)*1e9);
  // with loads from L1: 2 A + 2 B loads per 4 dp
  static uint16_t big[64*1024] __attribute__((aligned(64)));
  n=5000000; t=now();
  for(long i=0;i<n;i++){ int o=(i&7)*2048; _tile_loadd(4,big+o,64);_tile_loadd(7,big+o+512,64);_tile_loadd(5,big+o+1024,64);_tile_loadd(6,big+o+1536,64);
    _tile_dpbf16ps(0,4,5); _tile_dpbf16ps(1,4,6); _tile_dpbf16ps(2,7,5); _tile_dpbf16ps(3,7,6);}
  dt=now()-t;
  printf("2x2 with L1 loads: %.3f TFLOPS/core\n", 4.0*n*16*16*32*2/dt/1e12);
  n=5000000; t=now();
  for(long i=0;i<n;i++){ int o=(i&7)*2560; _tile_loadd(4,big+o,64);_tile_loadd(5,big+o+512,64);_tile_loadd(6,big+o+1024,64);_tile_loadd(7,big+o+1536,64);
    _tile_dpbf16ps(0,4,5); _tile_dpbf16ps(1,4,6); _tile_dpbf16ps(2,4,7); _tile_loadd(5,big+o+2048,64); _tile_dpbf16ps(3,4,5);}
  dt=now()-t;
  printf("1x4 (ours) with L1 loads: %.3f TFLOPS/core\n", 4.0*n*16*16*32*2/dt/1e12);
  _tile_release();
}
