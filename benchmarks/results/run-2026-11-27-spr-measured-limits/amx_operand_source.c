/* The kernel's 1x4 inner loop (one weight tile, four input tiles, K = 896) with the input tiles streamed from a
 * buffer of the given KB (16: L1; 448: L2; 4096: beyond L2) and the weight tile strided (1) or contiguous (0).
 * gcc -O2 -march=native amx_operand_source.c -o src && taskset -c 1 ./src 448 1 */
#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
typedef struct __attribute__((packed)) { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg;
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
#define K 896
#define KB 28
int main(int argc,char**argv){
  syscall(SYS_arch_prctl, 0x1023, 18);
  cfg c; memset(&c,0,sizeof c); c.palette=1; for(int t=0;t<8;t++){c.colsb[t]=64;c.rows[t]=16;}
  _tile_loadconfig(&c);
  int Bbytes = atoi(argv[1])*1024; int astrided = atoi(argv[2]);
  uint16_t *A = aligned_alloc(64, 16*K*2); memset(A,0,16*K*2);
  uint16_t *B = aligned_alloc(64, Bbytes); memset(B,0,Bbytes);
  int groups = Bbytes / (4*KB*1024); if(groups<1) groups=1;
  long iters=0; double t=now(); long dps=0;
  while(now()-t<1.0){
    for(int g=0; g<groups; g++){
      const uint16_t *x0 = B + (size_t)(Bbytes>=4*KB*1024 ? g*4*KB*512 : 0);
      _tile_zero(0);_tile_zero(1);_tile_zero(2);_tile_zero(3);
      for(int kb=0;kb<KB;kb++){
        const uint16_t *xb = Bbytes>=4*KB*1024 ? x0 + kb*4*512 : x0 + (kb%((Bbytes/4096)?(Bbytes/4096):1))*4*512;
        if(astrided) _tile_loadd(4, A + kb*32, K*2); else _tile_loadd(4, A + kb*512, 64);
        _tile_loadd(5, xb, 64); _tile_dpbf16ps(0,4,5);
        _tile_loadd(6, xb+512, 64); _tile_dpbf16ps(1,4,6);
        _tile_loadd(7, xb+1024, 64); _tile_dpbf16ps(2,4,7);
        _tile_loadd(5, xb+1536, 64); _tile_dpbf16ps(3,4,5);
        dps+=4;
      }
      static float buf[1024] __attribute__((aligned(64)));
      _tile_stored(0,buf,64);_tile_stored(1,buf+256,64);_tile_stored(2,buf+512,64);_tile_stored(3,buf+768,64);
    }
  }
  double dt=now()-t;
  printf("B %d KB, A %s: %.3f TF/core\n", Bbytes/1024, astrided?"strided":"contig", dps*16.0*16*32*2/dt/1e12);
}
