// Two builds of cpu_gemm.c as shared objects, foretell_linear_q8 called alternately on the same weights and inputs:
// the same bits (same=1), then min and median ms per build over REPS calls each, ns per unit (256 values x one row).
//   gcc -O3 -march=native -fopenmp -shared -fPIC cpu_gemm.c -o new.so -lm; gcc -O2 ab_calls.c -o ab_calls -ldl
//   ./ab_calls ./old.so ./new.so FMT N K M1,M2,.. THREADS REPS      (FMT: 6 Q5_0, 8 Q8_0, 12 Q4_K, 14 Q6_K)
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
typedef int (*fn)(const float *, const uint8_t *, int, const float *, float *, int, int, int, int);
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  fn f[2]; for(int i=0;i<2;i++){void*h=dlopen(argv[1+i],RTLD_NOW|RTLD_LOCAL); if(!h){printf("%s\n",dlerror());return 1;} f[i]=(fn)dlsym(h,"foretell_linear_q8");}
  int fmt=atoi(argv[3]),N=atoi(argv[4]),K=atoi(argv[5]),T=atoi(argv[7]),reps=atoi(argv[8]);
  int per = (fmt==12||fmt==14)?256:32, bytes = fmt==8?34:fmt==6?22:fmt==12?144:210;
  size_t wb=(size_t)N*K/per*bytes; uint8_t*w=malloc(wb); uint64_t s=88172645463325252ull;
  for(size_t i=0;i<wb;i++){s^=s<<13;s^=s>>7;s^=s<<17;w[i]=s;}
  if(fmt==8||fmt==6) for(size_t i=0;i<wb;i+=bytes){w[i]=0x00;w[i+1]=0x20;}
  if(fmt==12) for(size_t i=0;i<wb;i+=bytes){w[i]=0;w[i+1]=0x20;w[i+2]=0;w[i+3]=0x20;}
  if(fmt==14) for(size_t i=0;i<wb;i+=bytes){w[i+208]=0;w[i+209]=0x20;}
  char *ms=strdup(argv[6]);
  for(char*tok=strtok(ms,",");tok;tok=strtok(NULL,",")){
    int M=atoi(tok);
    float*x=malloc(sizeof(float)*M*K),*y[2]={malloc(sizeof(float)*M*N),malloc(sizeof(float)*M*N)};
    for(int i=0;i<M*K;i++){s^=s<<13;s^=s>>7;s^=s<<17;x[i]=(s%2001)/1000.0f-1.0f;}
    f[0](x,w,fmt,0,y[0],M,N,K,T); f[1](x,w,fmt,0,y[1],M,N,K,T);
    int same = memcmp(y[0],y[1],sizeof(float)*M*N)==0;
    double *t[2]={malloc(8*reps),malloc(8*reps)};
    for(int r=0;r<reps;r++) for(int i=0;i<2;i++){int k=(r&1)?1-i:i; double t0=now(); f[k](x,w,fmt,0,y[k],M,N,K,T); t[k][r]=now()-t0;}
    qsort(t[0],reps,8,cmp); qsort(t[1],reps,8,cmp);
    double units=(double)N*(K/256.0)*M;
    printf("fmt %d %dx%d M=%3d T=%d same=%d  A min %.3f med %.3f ms | B min %.3f med %.3f ms | B/A min %.3f med %.3f | A %.2f B %.2f ns/unit-thread\n",fmt,N,K,M,T,same,
      t[0][0]*1e3,t[0][reps/2]*1e3,t[1][0]*1e3,t[1][reps/2]*1e3,t[1][0]/t[0][0],t[1][reps/2]/t[0][reps/2],t[0][0]*1e9*T/units,t[1][0]*1e9*T/units);
    free(x);free(y[0]);free(y[1]);
  }
}
