/* foretell_linear_amx alone, random bf16 data, with a hash of the outputs (the bits) and TFLOPS:
 * gcc -O3 -march=native -fopenmp src/foretell/engine/cpu_gemm.c amx_kernel_harness.c -o h && ./h M N K threads seconds
 * PACKED=1: the weights handed over in tile order (16 rows x 32 values a tile, 1 KB contiguous), for a build of
 * cpu_gemm.c with amx_packed_weights.diff and -DPACKED_A (the same values, so the same hash). */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
typedef uint16_t bf16;
int foretell_amx_init(void);
int foretell_linear_amx(const bf16 *x, const bf16 *w, const uint8_t *wq, int fmt, const float *b, void *y, int M, int N, int K, int threads, int rnd);
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
static uint32_t s=12345; static uint32_t rnd(){s^=s<<13;s^=s>>17;s^=s<<5;return s;}
static bf16 rb(float sc){ float f=((int)(rnd()%2001)-1000)/1000.0f*sc; uint32_t u; __builtin_memcpy(&u,&f,4); return u>>16; }
int main(int argc, char **argv){
  int M=atoi(argv[1]), N=atoi(argv[2]), K=atoi(argv[3]), th=atoi(argv[4]); double secs = argc>5?atof(argv[5]):1.0;
  foretell_amx_init();
  bf16 *x=aligned_alloc(64,(size_t)M*K*2), *w=aligned_alloc(64,(size_t)N*K*2); float *y=aligned_alloc(64,(size_t)M*N*4+64);
  for(size_t i=0;i<(size_t)M*K;i++) x[i]=rb(1);
  for(size_t i=0;i<(size_t)N*K;i++) w[i]=rb(0.05);
  if(getenv("PACKED")){ bf16 *wp=aligned_alloc(64,(size_t)N*K*2);
    for(int blk=0;blk<N/16;blk++) for(int kb=0;kb<K/32;kb++) for(int r=0;r<16;r++) for(int c=0;c<32;c++)
      wp[(size_t)blk*16*K+(size_t)kb*512+r*32+c]=w[((size_t)blk*16+r)*K+kb*32+c];
    w=wp; }
  for(int i=0;i<3;i++) foretell_linear_amx(x,w,0,0,0,y,M,N,K,th,1);
  long n=0; double t=now();
  while(now()-t<secs){ foretell_linear_amx(x,w,0,0,0,y,M,N,K,th,1); n++; }
  double dt=(now()-t)/n;
  unsigned h=0; for(size_t i=0;i<(size_t)M*N;i++){unsigned u; __builtin_memcpy(&u,y+i,4); h=(h^(u>>16))*0x9E3779B1u; h^=h>>15;}
  printf("M=%d N=%d K=%d th=%d: %.1f us %.3f TF hash %08x\n",M,N,K,th,dt*1e6,2.0*M*N*K/dt/1e12,h);
}
