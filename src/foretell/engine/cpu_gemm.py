"""foretell's fp32 GEMM for passes of a few rows on a CPU, and its attention for every query of a pass: a small C
library built once with the machine's compiler.

Why: a verify pass of k draft tokens is k + 1 rows through every linear layer. Those layers are memory-bound
up to a few dozen rows (the weights are read once whatever the rows), so such a pass should cost about what
one token does. The library kernels do not get there on a 2-core Xeon with AVX-512 (no AMX): MKL's GEMM repacks
the weights on every call from 4 rows, and oneDNN's pre-packed one pays its own overhead. One MLP matrix of the
1.5B (8960 x 1536, fp32), ms per call, weights not in cache:

    rows           1     2     3     4     8     16    32
    MKL          1.70  1.95  2.08  3.94  5.71  4.61  5.95
    oneDNN       2.04  2.72  2.76  2.78  3.13  3.83  5.70
    this kernel  1.82  1.86  1.95  1.99  2.62  3.16  4.79

The kernel (``cpu_gemm.c``) reads 4 weight rows at a time, applies them to the input rows 4 at a time while
they sit in L1 and prefetches the next weights. It needs AVX2 + FMA or AVX-512 and a C compiler (``cc``); it is
compiled on first use with ``-O3 -march=native -fopenmp`` into the cache directory, linked to torch's own
OpenMP runtime (one thread pool), and loaded with ctypes. Where any of that is missing, :func:`load` returns
None and the engine keeps oneDNN's kernel. ``FORETELL_CPU_GEMM=0`` turns it off.

Each output is one reduction over K in a fixed order, so a row's result does not depend on the other rows of
the call (it is batch-invariant), though it may differ in the last bits from MKL's.

Weights may be stored as bf16 (``foretell_linear_bf16``): a bf16 is the top half of an fp32, so widening it in
registers is exact and the products are the same bits as with the fp32 copy, from half the bytes. The packaged
models are bf16 checkpoints computed in fp32, so the engine keeps only such copies (:func:`exact_bf16`). The 0.5B's
MLP matrix (4864 x 896), ms per call, same machine:

    rows           1     4     8     16    32    64
    MKL          0.62  1.25  1.67  1.83  2.49  3.70
    fp32 weights 0.63  0.79  0.87  1.44  2.25  3.89
    bf16 weights 0.42  0.52  0.74  1.39  2.15  3.78

A bf16 model (``--dtype auto`` on a CPU with native bf16) gives the kernel bf16 inputs: with AVX512-BF16 they
are multiplied by VDPBF16PS (``foretell_linear_bf16dot``: 32 products per instruction, summed in fp32, each
output rounded once to bf16), else widened to fp32. Rows stay independent. Ms per call on a 2-core AMD EPYC
(Zen 4, AVX512-BF16), bf16, against oneDNN's bf16 GEMM (torch's ``F.linear``), weights not in cache:

    rows                    1     4     8     16    32    64    128
    4864 x 896   oneDNN   0.60  0.63  0.74  0.91  1.24  1.87  2.95
                 kernel   0.37  0.43  0.59  0.83  1.27  2.24  3.48
    151936 x 896 oneDNN   19.3  20.9  24.9  27.9  37.8  56.4  96.3
    (the head)   kernel   14.1  13.6  17.3  22.6  35.2  59.7  137.1

The head's 137 ms at 128 rows was mostly page faults of a fresh 78 MB output; :meth:`CpuGemm.logits` writes the
head's logits already rounded to the model's bf16 (as fp32) into a buffer the engine keeps across passes.

Since 2026-11-26 each thread prefetches its next group of weight rows into L2, a share before each tile of input
rows, and a full tile's 16 sums are taken side by side on transposed vectors (the same tree of additions as
one horizontal sum each, so the same bits). Cold weights (24 matrices in turn, as a pass meets them), bf16,
same AMD EPYC, ms per call, before -> after (``benchmarks/results/engine-2026-11-26-epyc-prefetch``):

    rows                    1            16            93            128
    4864 x 896          0.40 -> 0.38  0.79 -> 0.63  2.71 -> 2.26  3.53 -> 3.18
    896 x 4864          0.30 -> 0.30  0.64 -> 0.62  2.34 -> 2.32  3.15 -> 2.98
    151936 x 896        11.8 -> 9.6   22.6 -> 17.1  81.5 -> 69.4  107 -> 96

The prefetch then went into smaller shares, one before each block of 4 weight rows of each input tile (before,
one per tile), so that a thread's prefetches do not crowd out its current rows' loads: same AMD EPYC, ms, a share
per tile -> a share per block, two rounds (``benchmarks/results/engine-2026-11-26-epyc-prefetch-spread``):

    rows                    1            8             16            93
    4864 x 896          0.35 -> 0.30  0.49 -> 0.32  0.59 -> 0.45  2.22 -> 2.23
    151936 x 896        10.3 -> 8.5      -          17.6 -> 13.9  69.2 -> 68.7
    151936 x 1536       18.3 -> 18.5  25.3 -> 19.9      -             -

On an Intel Xeon with AMX (2 of its cores) the share per tile had made one row slower than no prefetch (the head
9.5 -> 10.8 ms); a share per block is back near no prefetch there (10.2) and faster at 16 rows (33.8 -> 29.8).

The same library holds the **attention** (:meth:`CpuGemm.attention`: a decode token, a verify pass's drafts,
and since 2026-11-26 a prompt chunk's queries too, 2.6-3.9x faster than SDPA with a causal mask for 512 of
them after 0-3,584 keys, the 0.5B's and the 1.5B's heads, bf16: a 2,048-token prefill of the 0.5B ~19% faster
on the AMD EPYC below). The keys the call's queries may see are copied once per KV head into fp32, transposed,
so a query's scores are vector lanes (each one chain of FMAs over the head's dimensions); the query heads that
share a KV head go through its keys and values together; softmax in fp32 (a polynomial exp). Each query is
computed by one thread in a sequence of instructions that depends only on its own key range, so its result is
the same bits alone or in a pass of any length: exact mode needs that, and it is faster than SDPA at every size
measured, so the default mode uses it too. Ms per layer call (median), the 0.5B's shapes (14 query heads, 2 KV
heads, 64 dims), bf16, n queries at the end of 1,100 cached keys, same AMD EPYC (``benchmarks/cpu_attention.py``):

    queries                        1      8      32     64     128
    SDPA, one masked call        0.089  0.387  1.335  2.194  4.372
    SDPA, one call per query     0.095  0.771  2.613  5.198  10.165
    this kernel                  0.077  0.235  0.733  1.381  2.685
    this kernel on VDPBF16PS     0.054  0.145  0.413  0.759  1.454

Since 2026-11-29 (fp32 and widened bf16) the queries of a KV head run in blocks of up to 8 that share each tile of
keys and values while it is in L1, and the keys are transposed tile by tile (32 keys' dimensions one after another),
so the scores read them in order: the same arithmetic for each query, so the same bits. And a sequence's fp32 keys
stay transposed between passes (``SeqKV.tiles``, ``foretell_attention_f32_tiles``): a pass transposes only the keys
from ``valid`` on (its own, and those a rollback or another write changed), for half again the KV memory.
On the 2-core Cascade Lake, fp32, the 0.5B's heads, ms per layer call: 512 queries after 4,096 keys 120 -> 49, 16
queries 5.0 -> 2.2 (the VM's fast phase; 1.5x in a slow one); the 0.5B's one-token pass after 4,096 tokens 52.4 ->
46.1 ms with the kept tiles (``benchmarks/results/run-2026-11-29-cascadelake-attention``).

Since 2026-11-30, on AVX2 (16 registers), a KV head's query heads (7 on the 0.5B, 6 on the 1.5B) go through its
keys and values in one group, a vector at a time: before, 6 heads over two vectors spilled accumulators to the
stack, and the 7th head ran alone on two chains of FMAs, waiting on their latency. Each (query, head)'s
probabilities now weigh all 64 dimensions of a value row at once (8 chains), so they are read once, not 4 times,
and a query's heads lie side by side per dimension (one pointer for their broadcasts). The same chains of FMAs in
the same order: the same bits as before (checked against the old build). 2-core AMD EPYC Zen 3, fp32, the 0.5B's
heads, ms a layer call, old / new: 96 queries after 4,096 keys 24.5 / 17.2, after 8,192 50.0 / 36.4; 16 queries
after 8,192 9.4 / 6.6; one query 1.10 / 0.88. Whole passes after 4,096-8,192 cached tokens 0.76-0.96x the time,
a 512-token prompt chunk 0.81-0.89x. Through the server, a 4,473-token prompt's 4,343-token reply: 112 -> 84 s
with the prediction, 117 -> 96 s with n-gram lookup alone (two starts, each with its own start-up cost curve, so
other draft lengths too; ``benchmarks/results/run-2026-11-30-epyc-long-context``).

The last row (``foretell_attention_bf16dot_rows``, bf16 with AVX512-BF16, head sizes that are a multiple of 32)
multiplies bf16 pairs natively: of dimensions for the scores, of keys at even cache positions for the values
(a key range that splits a pair adds that key alone), with the probabilities rounded to bf16 before they weigh
the values, as FlashAttention does; queries stay independent.

**GGUF blocks** (since 2026-11-26; ``foretell_linear_q``, AVX512-BF16 builds): a model converted from a quantized
GGUF keeps its linear layers' blocks too (:mod:`foretell.models.gguf_blocks`), and passes of up to
:data:`BLOCK_ROWS_MAX` rows read them: each block of 4 weight rows is decoded into bf16 in a per-thread buffer
(Q5_0 and Q4_K through a table of the block's possible values and VPERMW), then multiplied exactly as stored bf16
weights are. The decoded values are those of GGUF's reference decoder rounded as torch rounds, so where the
model's bf16 weights came from these blocks (checked per layer) the products are the same bits from 0.56-1.06
bytes a weight instead of 2. Cold weights, 2 threads, ms per call, bf16 weights -> blocks (random blocks in
the 0.5B's shapes and formats, ``benchmarks/results/engine-2026-11-26-gguf-blocks``):

    rows                           1             2             4             8
    2-core AMD EPYC (Zen 4)
    4864 x 896 Q5_0           0.297 -> 0.250  0.280 -> 0.198  0.299 -> 0.239  0.277 -> 0.342
    896 x 4864 Q4_K           0.251 -> 0.216  0.288 -> 0.233  0.310 -> 0.258  0.377 -> 0.329
    151936 x 896 Q5_0 (head)  6.14 -> 5.53    7.02 -> 5.79    8.36 -> 7.18    8.22 -> 10.38
    Intel Xeon (AMX host, 2 of its cores)
    4864 x 896 Q5_0           0.475 -> 0.385  0.519 -> 0.430  0.633 -> 0.555  0.632 -> 0.655
    896 x 4864 Q4_K           0.316 -> 0.389  0.346 -> 0.431  0.435 -> 0.564  0.877 -> 0.779
    151936 x 896 Q5_0 (head)  12.9 -> 9.87    14.1 -> 11.5    17.2 -> 14.4    20.8 -> 24.1

Decoding costs about what the narrower weights save once the pass is not memory-bound (8 rows), hence the limit;
Q6_K's 6-bit values took longer to decode than its bf16 weights to read, so it is not decoded.

**AMX tiles** (since 2026-11-27; ``foretell_linear_amx``, ``foretell_attention_amx``; builds for a CPU with AMX,
used where Linux grants the process the tile state, ``FORETELL_CPU_AMX=0`` turns them off): bf16 rows of a
weight whose rows hold a multiple of 32 values go through TDPBF16PS instead of VDPBF16PS. A tile of 16 weight
rows (loaded straight from the weights, or from blocks decoded as above) times the input rows as pairs, 16 at a
time, zero-padded: each output is one chain of tile products over K from zero, so a row's bits depend on its
own input alone, whatever the other rows, as on the other routes (but other bits than VDPBF16PS: a layer takes
one route for every call). Attention of bf16 queries with head sizes that are a multiple of 64 runs on tiles
too: scores and weighted values 16 queries at a time, a query's keys outside its range adding exact zeros. On a
2-core Sapphire Rapids VM, ms per call, the 0.5B's shapes, AMX tiles / VDPBF16PS / oneDNN's bf16 GEMM
(``benchmarks/results/run-2026-11-27-spr-amx/kernels_amx.txt``; bf16 results written by the kernel):

    rows                  1                  16                 128
    4864 x 896     0.27 / 0.29 / 0.48   0.27 / 1.08 / 0.47   0.80 / 7.15 / 1.00
    896 x 4864     0.24 / 0.23 / 0.51   0.30 / 1.15 / 0.46   0.74 / 6.66 / 1.08
    151936 x 896   11.8 / 12.3 / 16.3   12.4 / 32.4 / 19.9   34.3 / 249 / 43.0

Attention after 3,000 keys (14 heads, 2 KV heads, 64 dimensions), AMX tiles / SDPA / VDPBF16PS: one query
0.21 / 0.25 / 0.15, 16 queries 0.39 / 0.81 / 1.25, 128 queries 2.40 / 3.65 / 9.37, a 512-query chunk
9.9 / 15.1 / 39.5.

The weight tile's 16 rows lie K values apart, streams the hardware prefetchers follow poorly: since 2026-11-28
each tile step asks for the rows' values 8 steps ahead (same products, same bits). Whole passes of the 0.5B
(1,200 cached tokens, 2-core Sapphire Rapids VM, in one process, each size against the kernel without it,
interleaved, fastest of 6): 32 tokens 0.86x the time, 64 and 96 tokens 0.77x, 128 tokens 0.86x, one token
unchanged. With that, the engine's layers read their bf16 weights on AMX in every pass (not their GGUF blocks,
:data:`BLOCK_ROWS_MAX`) and join siblings' weights into one call (:class:`foretell.engine.runner.SharedInputGroup`).
This VM's speed drifts by up to 1.7x within minutes (a 64-token pass took 128 ms and 218 ms in two runs of the
same code), so compare only what ran side by side. Tried and not kept (same bits, no gain in whole passes): 2 x 2
tiles (32 weight rows x 2 input tiles) for passes of 128 rows and more; there every tile schedule tried, with the
loads a GEMM needs, ran at 0.8-1.2 TFLOPS against 4.5 for products alone, a load waiting for its register's last
reader (``benchmarks/results/run-2026-11-28-spr-amx-wide``).

Since 2026-11-27 the attention's last block of a call, when it holds fewer than 16 queries (a decode token, the
odd rows of a verify pass), runs on tiles configured to that many rows: before, its 16-row score tiles were stored
in full and the absent queries' probabilities cleared, 7 and 3.4 MB a layer for one query after 8,192 keys. Whole
passes of the 0.5B, the old kernel against this one alternating pass by pass in one process, median ratios of 6
(``benchmarks/results/run-2026-11-27-spr-measured-limits/attention_rows_ab.py``): one token after 8,192 cached
tokens 0.92x the time, after 4,096 0.94x, after 256 0.98x; 17 tokens after 4,096-8,192 0.97-0.98x. The same bits.

Since 2026-11-28 a block's rows may be a KV head's query heads (grouped-query attention), for each query in turn, where
that takes fewer blocks than one query head's queries and leaves no thread without a block: a decode token's keys
and values are read once for the 7 query heads that share them (the 0.5B), not 7 times. Kernel alone (14 heads, 2
KV heads, 64 dims, 2 threads, 2-core Sapphire Rapids VM), ms a call: one query after 8,192 keys 0.74 -> 0.40, 17
queries 1.91 -> 1.54, 128 queries unchanged (those blocks stay per query head). Whole passes of the 0.5B as above:
one token after 8,192 cached tokens 0.83x the time, after 4,096 0.88x, 17 tokens 0.89x and 0.95x, after 256 and
2,048 within 4%. The same bits (a row of a tile product depends on its own row alone).

**Layer glue** (since 2026-11-28; ``foretell_rmsnorm_bf16``, ``foretell_silu_mul_bf16``, ``foretell_rope_bf16``;
builds for AVX-512 with BW and VL): in bf16 exact mode a decoder layer's elementwise steps run as one call each
(:class:`foretell.engine.runner.GlueRMSNorm`, :class:`~foretell.engine.runner.GlueMLP`, the lean loop's rotary
embedding). torch ran them as chains of small ops: in a 128-token pass of the 0.5B about 34 of 200 ms (its bf16
SiLU alone 8 ms, 2.3 G values/s), in a one-token pass about 7 of 50 ms (some 300 op calls). Now: the RMSNorm with
the residual addition before it, SiLU(gate) · up on the halves of the joined gate/up result read in place, and
the rotary embedding of the queries and keys from their views of the q/k/v result. Every value is rounded where
torch's bf16 ops round it; the residual sums and the rotary embedding are torch's bits, the RMSNorm's sum of
squares and the SiLU's exponential the kernel's own, so a few values may differ from torch's modules in the last
bit (none of 700,000 random ones did). Rows stay independent. Whole passes of the 0.5B, 1,200 cached tokens, glue
off and on alternating in one process, median paired ratio of 8 (2-core Sapphire Rapids VM,
``benchmarks/results/run-2026-11-28-spr-layer-glue``): 1 token 0.91x the time, 4 tokens 0.91x, 17 tokens 0.88x,
128 tokens 0.92x, but 64 tokens 1.01x and 256 0.99x in that run (drift); the logits of a 33-token pass equal to
the bit. Whole requests, five rounds: plain decoding 0.91x, a rename with its prediction 0.93x, a 908-token
prompt's prefill 0.94x.

The same steps on **fp32** rows (``foretell_rmsnorm_f32``, ``foretell_silu_mul_f32``, ``foretell_rope_f32``; every
build, AVX2 or AVX-512): fp32 exact mode, what ``--dtype auto`` picks on a CPU without native bf16. Each product and
sum is one rounding, as torch's separate fp32 ops round them (an empty ``asm`` keeps the compiler from fusing a
product into the next sum), so the residual sums and the rotary embedding are torch's bits; the sum of squares
and the exponential are the kernel's own (within 3e-6 of torch's modules, relative). Whole passes of the 0.5B in
fp32 with AMX off (2-core Sapphire Rapids VM, 1,200 cached tokens, glue off and on alternating, median paired
ratio of 8; ``benchmarks/results/run-2026-11-28-spr-fp32-glue``): AVX-512 build 1 token 0.93x the time, 4 tokens
0.94x, 17 tokens 0.94x, 64 tokens 0.95x, 128 tokens 0.96x, 256 tokens 0.89x; AVX2 build (``-mno-avx512f``, as on
a CPU without AVX-512) 1 token 0.94x, 4 tokens 0.97x, 17-256 tokens 0.99-1.02x (compute-bound passes there).

**int8 products on GGUF blocks** (since 2026-11-28; ``foretell_linear_q8``, builds for AVX512-VNNI, and since
2026-11-29 for AVX2 alone: VPMADDUBSW, see below; :meth:`CpuGemm.linear_int8`): the way llama.cpp computes a quantized model. Each input row is cut into blocks of
32 values, each scaled to int8 by its largest magnitude; a block's 32 products with the weight block's integers
(Q5_0, Q8_0, Q4_K, Q6_K) are summed exactly in int32 by VPDPBUSD (64 products an instruction), then scaled by the
two blocks' scales in fp32, four chunks of 64 values folded together before the floats. It reads 0.56-1.06 bytes a
weight instead of 2, and is not the bf16 model's arithmetic: the GGUF file's own weights (exactly) times int8
inputs, so its values differ from the bf16 route's by about the int8 rounding (on the 0.5B's layers, random
inputs with an outlier channel: 0.6-1.2% of the largest output). Each output is one fixed sequence of instructions
over its own input row and weight row, whatever the number of rows, so exact mode uses it for the layers that have
such blocks on CPUs with VNNI (or AVX2) and no AMX, where the model runs in fp32 (``--dtype auto`` picks fp32 for
it on a CPU with AVX512-BF16 and no AMX: :func:`foretell.engine.runner.int8_dtype`;
:func:`foretell.engine.runner.int8_by_default`; ``--no-int8-linears`` keeps the bf16 route), the output head
too where it has them (a tied embedding's). The
0.5B's layers, cold weights, 2-core Cascade Lake Xeon (AVX-512 with VNNI, no BF16/AMX), ms per call, bf16
weights' fp32 route -> int8 (fastest of 7, alternating; ``benchmarks/results/run-2026-11-28-cascadelake-int8``):

    rows                     1              4              16             64
    4864 x 896 Q5_0    0.588 -> 0.396  0.685 -> 0.469  1.316 -> 1.078  3.942 -> 3.751
    896 x 4864 Q4_K    0.456 -> 0.437  0.535 -> 0.574  1.248 -> 1.099  4.671 -> 3.869
    896 x 896 Q5_0     0.123 -> 0.075  0.147 -> 0.112  0.248 -> 0.213  0.738 -> 0.706

(a second run: the ratios 0.60 / 0.84 / 1.10 / 1.00 for 4864 x 896 and 0.93 / 1.14 / 0.87 / 0.85 for 896 x 4864:
single calls swing on that VM; whole passes, below, are the figure to read)

Whole passes of the 0.5B in fp32 exact mode (600 cached tokens, the route on and off alternating in one
process, median paired ratio of 6): 1 token 0.78x the time (64 against 82 ms), 4 tokens 0.89x, 16 tokens 0.92x,
64 tokens 0.97x, 128 tokens 0.94x. Before the four chunks were folded (one conversion, product and sum per
chunk and pair) passes of 16 rows and more were slower than the bf16 route: both were bound by the one FMA port.

A round later (``benchmarks/results/run-2026-11-28-cascadelake-q8fused``): passes of up to 8 rows decode
each weight row in registers as they read it (no buffer; the scales gathered and widened in registers, not
stored and reloaded), longer ones read each group of 4 chunks with weights and inputs interleaved (a 4 x 4
transpose per 128 bits: VPDPBUSD sums a group in one chain, 7 instructions a group and pair instead of 16). The
integer sums are the same, so every output keeps its bits. Q6_K (the 0.5B's 12 ``down_proj`` layers, 16-value
sub-blocks with int8 scales: a folded group's lanes are one sub-block each) joins the formats, and the output
head takes the route from the tied embedding's Q5_0 blocks (94 MB, against its 136 MB int8 argmax copy or its
272 MB bf16 weights). Same machine, cold weights, ms per call, the round before -> this round:

    rows                     1              8              16             64
    4864 x 896 Q5_0    0.325 -> 0.232  0.655 -> 0.589  1.054 -> 0.836  4.102 -> 3.057
    896 x 4864 Q4_K    0.398 -> 0.220  1.019 -> 0.868  1.110 -> 0.809  3.656 -> 2.511
    896 x 896 Q5_0     0.058 -> 0.039  0.129 -> 0.112  0.210 -> 0.166  0.675 -> 0.532
    896 x 4864 Q6_K    0.255 (its bf16 route read 8.7 MB: about 0.45)
    head 151936 x 896  bf16 route 15.8 / 18.5 / 37.4 / 127.7 (1, 4, 16, 64 rows) -> int8 9.4 / 14.0 / 31.4 / 118.3

The 16 sums of a full tile run side by side (``store_sums16``: the same tree of additions as one horizontal sum
each). Whole passes, the two rounds alternating in one process (600 cached tokens, median paired ratio of 8): rows
that need only their argmax (greedy; the round before read its head's int8 copy for 1-2 rows) 1 token 0.84x the
time (57.1 -> 49.1 ms in a quieter run), 4 tokens 0.82x, 16 tokens 0.78x, 64 tokens 0.71x; all logits (sampling)
1 token 0.78x, 16 tokens 0.80x, 64 tokens 0.77x.

A round later (``benchmarks/results/run-2026-11-28-cascadelake-layerloop``), two more entry points on the same
integers:

- ``foretell_layers_q8`` runs a whole decode or verify pass of a decoder's layers in one call
  (``layer_loop.Q8LayerLoop``): the functions the lean loop calls from Python, in its order, so the same bits,
  without about a dozen Python calls and tensors per layer. Whole passes of the 0.5B, alternating with the
  layer-by-layer loop: 1 token 0.66-0.72x the time (49.5 -> 37.5 ms), 4 tokens 0.75-0.77x, 16 tokens 0.83-0.84x,
  64 tokens 0.92-1.00x.
- ``foretell_gemm_q8`` (:meth:`CpuGemm.gemm_int8`) computes a prompt chunk's rows: each thread decodes 32 weight
  rows into VPDPBUSD's layout (16 rows x 4 values a vector, unsigned with a zero point), then runs tiles of 6 input
  rows x 32 outputs against them with the input broadcast, each output's blocks summed in one fixed order (not
  ``foretell_linear_q8``'s order, so not its bits; each row alone all the same). At 64 rows 0.61-0.95x
  ``foretell_linear_q8``'s time, at 512 rows 1.4-2x the library's fp32 GEMM; a 1536-token prompt's prefill
  0.66-0.76x the time. Verify passes cannot take it: their rows must have the bits of one-row decode steps, and
  a one-row kernel in its order (tried: VPDPBUSD lanes per weight row reduced to block sums) ran 1.2-1.9x
  ``foretell_linear_q8``'s time.

A round later (``benchmarks/results/run-2026-11-28-cascadelake-panels``): **panels**. At load each int8 layer's
blocks are laid out once (:meth:`CpuGemm.panels`, ``foretell_pack_p8``): per 16 weight rows, the values in the
order ``foretell_gemm_q8``'s tiles read them, kept in as many bits as the file's (Q8_0 bytes; Q5_0, Q4_K and Q6_K
nibbles, two vectors a 64-byte load, with Q5_0's fifth and Q6_K's fifth and sixth bits as 64-bit masks), then the
file's scales per block and row. Unpacking a panel for the tiles is a few instructions per 64 values (an AND, a
shift, a masked add), not the 16-row transposes that made the many-row layout too dear for one row, so every pass
takes ``foretell_gemm_q8``'s tiles: decode steps, verify passes and prompt chunks sum each output in one order
(the verify rows have the bits of one-row steps, as before; a prompt chunk's rows now have them too). As many
bytes as the blocks (Q4_K 148 a super-block and row, against 144); the blocks are not kept beside them. Weights of
rows not a multiple of 16 keep their blocks and ``foretell_linear_q8``. Same machine, cold weights, ms per call,
blocks -> panels (fastest of 6, alternating):

    rows                     1              4              16             64
    4864 x 896 Q5_0    0.407 -> 0.330  0.663 -> 0.418  1.332 -> 0.787  4.599 -> 2.523
    896 x 4864 Q6_K    0.396 -> 0.372  0.662 -> 0.476  1.119 -> 0.985  3.710 -> 3.090
    896 x 896 Q5_0     0.091 -> 0.073  0.139 -> 0.095  0.285 -> 0.175  0.862 -> 0.491
    37984 x 896 Q5_0   2.803 -> 2.107  4.573 -> 2.834  9.861 -> 5.930  34.26 -> 17.44 (a quarter of the head)

Whole passes of the 0.5B (600 cached tokens, two runners in one process alternating, median paired ratio of 8):
1 token 0.87x the time (47.5 -> 40.1 ms), 4 tokens 0.67x, 16 tokens 0.62x, 32 tokens 0.55x, 64 tokens 0.57x
(566 -> 316 ms), 128 tokens 0.53x. The cost curve flattens: 64 tokens cost 7.9 one-token passes instead of 11.9.

**The int8 route without AVX512-VNNI** (2026-11-29, ``benchmarks/results/run-2026-11-29-epyc-avx2-int8``): an
AVX2 build's ``foretell_linear_q8`` takes the same blocks and the same int8 inputs (blocks of 32, the same
integers and scales) with VPMADDUBSW (unsigned weight bytes times signed inputs, pairs into int16: exact here, the
weights' bytes being at most 63, or Q8_0's |q| <= 128 against |qx| <= 127) and VPMADDWD (pairs into int32; for Q6_K
by each 16 values' scale). Per weight row and group of 8 blocks its 8 int32 sums go into one vector, are converted
and scaled by 8 weight times 8 input scales into 8 float lanes, summed in one fixed order at the end: each row
alone, whatever M. Passes of 1-2 rows get the 8 sums by horizontal adds (as int16 while Q4_K's and Q5_0's sums
fit); passes of 3 rows and more transpose each weight group once (and the inputs once per call) so that a lane is
a block, and add the products as int16 where they fit, with no horizontal adds per row: the same integers, then
the same float instructions, so the same bits (16-row calls 0.65-0.88x the time). No panels, no many-row kernel:
the prompt chunks take the library's fp32 weights (kept), and no bf16 copy is kept (no pass reads it). The
whole-pass loop (``foretell_layers_q8``) is built there too. 2-core AMD EPYC (Zen 3, AVX2 only), a 0.5B-shaped pass
of 24 layers' linears, cold weights, int8 / bf16 route (before the transposed path): 1 row 0.54x the time, 2 rows
0.65x, 4-16 rows 0.67-0.68x, 32 rows 0.72x; plain decoding of the 0.5B 0.43x the time (100 -> 42 ms a token), the
same tokens. The cost curve with the transposed path: 16 tokens 3.8 one-token passes (5.4 without), 64 tokens
14.9 (20.3).

2026-11-30 (``benchmarks/results/run-2026-11-30-epyc-int8-avx2``), the same bits throughout: one-row passes decode
each block into registers and multiply it at once (no group stored and read back), keep each row's sum in a register
over its groups, gather the fp16 scales 4 to a general register (Q4_K's 6-bit scales unpacked 4 to a 32-bit word),
and ask for the weight row 8 rows on (passes of under 10 rows); two-row passes take the transposed path (not for
Q8_0); passes of 10 rows and more on rows of up to 4 groups (the 0.5B's 896-wide layers, 70% of its products) hold
each input row's sums in registers over its groups, the weight rows' groups decoded once into L1. Whole passes of the
0.5B (two engines alternating, medians of 8, after 256 / 2,048 cached tokens): 1 token 0.73x / 0.78x the time (44.2
-> 32.1 ms), 2 tokens 0.86x / 0.87x, 4-8 tokens 0.94-0.95x, 16-32 tokens 0.73-0.78x, 64 tokens 0.65x / 0.82x, 96
tokens 0.90x / 0.91x. Later that day (``benchmarks/results/run-2026-11-30-epyc-threads``), the same bits: passes of
2+ rows share out their weight rows in chunks, first come first served (a core slowed by its VM neighbours no longer
holds the other at every call's end), and both threads quantize the inputs: the threads' samples waiting in OpenMP's
barriers 7.4% -> 3.6% of a 96-token pass, 96-token passes 0.98x the time (one engine, its library swapped pass by
pass: two engines, as above, carry a bias of a few percent).

Example::

    gemm = load()                     # None where it cannot be built here
    y = gemm.linear(x, weight, bias)  # == torch.nn.functional.linear(x, weight, bias), up to rounding
    assert torch.equal(gemm.linear(x, weight.bfloat16(), bias), y)  # where every weight is exactly a bf16
"""

from __future__ import annotations

import copy
import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("cpu_gemm.c")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")

# GGUF block formats the kernel reads: type id -> (values, bytes) per block
GGUF_BLOCKS = {8: (32, 34), 6: (32, 22), 12: (256, 144), 14: (256, 210)}  # Q8_0, Q5_0, Q4_K, Q6_K
PANELS = 100
"""A weight's blocks laid out as panels (:meth:`CpuGemm.panels`) have the type ``PANELS`` + its GGUF type."""
GGUF_BLOCKS.update({PANELS + 8: (32, 34), PANELS + 6: (32, 22), PANELS + 12: (256, 148), PANELS + 14: (256, 210)})
BF16_FORMATS = (8, 6, 12)
"""GGUF block formats :meth:`CpuGemm.linear` decodes to bf16 (Q8_0, Q5_0, Q4_K; Q6_K's bf16 weights were faster
to read than its blocks to decode)."""
INT8_FORMATS = (8, 6, 12, 14, PANELS + 8, PANELS + 6, PANELS + 12, PANELS + 14)
"""GGUF block formats :meth:`CpuGemm.linear_int8` multiplies with int8 inputs (Q8_0, Q5_0, Q4_K, Q6_K)."""
BLOCK_ROWS_MAX = 4
"""Passes of up to this many rows read a layer's GGUF blocks (one input tile: decoding costs about what the
narrower weights save); longer ones read its bf16 weights. Same bits either way. On AMX tiles the engine's layers
read their bf16 weights in every pass (:func:`foretell.engine.runner._checked_blocks`): with the tiles' weight
prefetch a one-token pass of the 0.5B took 0.90x the time reading them (paired, 80 passes; the 1.5B 0.92x)."""


@dataclass(frozen=True)
class GgufWeight:
    """A linear layer's weight [N, K] kept as the GGUF file's blocks: ``data`` is uint8, N rows of K values in
    the block format ``fmt`` (a GGUF type id of :data:`GGUF_BLOCKS`), laid out as in the file."""

    fmt: int
    data: torch.Tensor
    shape: tuple[int, int]

    def __post_init__(self):
        if self.fmt not in GGUF_BLOCKS:
            raise ValueError(f"GGUF type {self.fmt} is not one of the block formats the kernel decodes")
        values, nbytes = GGUF_BLOCKS[self.fmt]
        n, k = self.shape
        if k % values or self.data.dtype != torch.uint8 or not self.data.is_contiguous() \
                or self.data.numel() != n * k // values * nbytes:
            raise ValueError(f"GGUF blocks of type {self.fmt} do not hold a [{n}, {k}] weight")


class CpuGemm:
    """The loaded kernel: :meth:`linear` computes ``F.linear`` on the CPU for fp32 inputs, with fp32 weights or
    bf16 ones (widened exactly in registers: the same bits as on the fp32 copy, from half the bytes), and for
    bf16 inputs with bf16 weights (a bf16 model): on VDPBF16PS where the CPU has AVX512-BF16 (:attr:`bf16dot`),
    else widened to fp32; each output rounded once to bf16."""

    def __init__(self, library: ctypes.CDLL, path: Path, amx: bool = True):
        self.path = path
        self._fns = {torch.float32: library.foretell_linear, torch.bfloat16: library.foretell_linear_bf16}
        self._dot = getattr(library, "foretell_linear_bf16dot", None)  # built only for AVX512-BF16
        for fn in [*self._fns.values(), *([self._dot] if self._dot is not None else [])]:
            fn.restype = None
            fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 5
        self._attention = {torch.float32: library.foretell_attention_f32_rows,
                           torch.bfloat16: library.foretell_attention_bf16_rows}
        # bf16 on VDPBF16PS, head sizes that are a multiple of 32 (built only for AVX512-BF16)
        self._attention_dot = getattr(library, "foretell_attention_bf16dot_rows", None)
        for fn in [*self._attention.values(), *([self._attention_dot] if self._attention_dot is not None else [])]:
            fn.restype = None
            fn.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_int] * 4 + [ctypes.c_long, ctypes.c_float, ctypes.c_int]
        self._attention_tiles = library.foretell_attention_f32_tiles  # fp32, with a sequence's tiled keys
        self._attention_tiles.restype = None
        self._attention_tiles.argtypes = [*self._attention[torch.float32].argtypes, ctypes.c_void_p, ctypes.c_long,
                                          ctypes.c_int]
        self.key_tile = int(library.foretell_key_tile())  # keys a tile of tiled keys holds (2 vectors)
        # GGUF blocks decoded to bf16 in the kernel (built only for AVX512-BF16)
        self._linear_q = getattr(library, "foretell_linear_q", None)
        self._dequantize = getattr(library, "foretell_dequantize", None)
        if self._linear_q is not None and self._dequantize is not None:
            self._linear_q.restype = self._dequantize.restype = ctypes.c_int
            self._linear_q.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int] + [ctypes.c_void_p] * 2 \
                + [ctypes.c_int] * 5
            self._dequantize.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                         ctypes.c_void_p]
        # the same products on AMX tiles (built only for AMX; used where Linux grants this process the tiles)
        self._amx = getattr(library, "foretell_linear_amx", None)
        if self._amx is not None:
            library.foretell_amx_init.restype = ctypes.c_int
            if amx and library.foretell_amx_init() == 0:
                self._amx.restype = ctypes.c_int
                self._amx.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] + [ctypes.c_void_p] * 2 \
                    + [ctypes.c_int] * 5
            else:
                self._amx = None
        self._attention_amx = getattr(library, "foretell_attention_amx", None) if self._amx is not None else None
        if self._attention_amx is not None:
            self._attention_amx.restype = ctypes.c_int
            self._attention_amx.argtypes = self._attention[torch.bfloat16].argtypes
        self._head_bounds = getattr(library, "foretell_head_bounds_amx", None) if self._amx is not None else None
        if self._head_bounds is not None:
            self._head_bounds.restype = ctypes.c_int
            self._head_bounds.argtypes = [ctypes.c_void_p] * 8 + [ctypes.c_int] * 4
        self._head_bounds_int8 = getattr(library, "foretell_head_bounds_int8", None)  # any AVX2 build
        if self._head_bounds_int8 is not None:
            self._head_bounds_int8.restype = ctypes.c_int
            self._head_bounds_int8.argtypes = [ctypes.c_void_p] * 8 + [ctypes.c_int] * 4
        # int8 products on GGUF blocks (VPDPBUSD with AVX512-VNNI, else VPMADDUBSW with AVX2): llama.cpp's numerics,
        # see linear_int8
        self._linear_q8 = getattr(library, "foretell_linear_q8", None)
        self._q8_decode = getattr(library, "foretell_q8_decode", None)
        if self._linear_q8 is not None and self._q8_decode is not None:
            self._linear_q8.restype = self._q8_decode.restype = ctypes.c_int
            self._linear_q8.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int] + [ctypes.c_void_p] * 2 \
                + [ctypes.c_int] * 4
            self._q8_decode.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                        ctypes.c_void_p]
        else:
            self._linear_q8 = self._q8_decode = None
        # a prompt chunk's rows on int8 products (gemm_int8)
        self._gemm_q8 = getattr(library, "foretell_gemm_q8", None) if self._linear_q8 is not None else None
        if self._gemm_q8 is not None:
            self._gemm_q8.restype = ctypes.c_int
            self._gemm_q8.argtypes = self._linear_q8.argtypes
        self._pack_p8 = getattr(library, "foretell_pack_p8", None) if self._gemm_q8 is not None else None
        # passes on panels of up to this many rows decode the values in registers (p8_tile), longer ones through a
        # buffer per tile; the same bits either way (tests set it to compare the two)
        try:
            self._p8_fused_rows = ctypes.c_int.in_dll(library, "foretell_p8_fused_rows")
        except ValueError:  # a build without the knob
            self._p8_fused_rows = None
        if self._pack_p8 is not None:
            self._pack_p8.restype = ctypes.c_int
            self._pack_p8.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                      ctypes.c_int]
        # a whole pass of a decoder's layers on the int8 route (layer_loop.Q8LayerLoop)
        self.layers_q8 = getattr(library, "foretell_layers_q8", None) if self._linear_q8 is not None else None
        if self.layers_q8 is not None:
            self.layers_q8.restype = ctypes.c_int
            self.layers_q8.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int] \
                + [ctypes.c_void_p] * 5 + [ctypes.c_int] * 6 + [ctypes.c_float] * 2 + [ctypes.c_int]
        # a decoder layer's elementwise steps on bf16 rows (built only for AVX-512 with BW and VL): layer glue
        self._rmsnorm = getattr(library, "foretell_rmsnorm_bf16", None)
        self._silu_mul = getattr(library, "foretell_silu_mul_bf16", None)
        self._rope = getattr(library, "foretell_rope_bf16", None)
        if self._rmsnorm is not None and self._silu_mul is not None and self._rope is not None:
            self._rmsnorm.restype = self._silu_mul.restype = self._rope.restype = None
            self._rope.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_long] + [ctypes.c_void_p] * 3 \
                + [ctypes.c_int] * 3
            self._rmsnorm.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_float, ctypes.c_void_p] + [ctypes.c_int] * 2
            self._silu_mul.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int, ctypes.c_void_p] + [ctypes.c_int] * 2
        else:
            self._rmsnorm = self._silu_mul = self._rope = None
        # the same steps on fp32 rows (any build)
        glue32 = [getattr(library, f"foretell_{name}_f32", None) for name in ("rmsnorm", "silu_mul", "rope")]
        if all(fn is not None for fn in glue32):
            for fn in glue32:
                fn.restype = None
            glue32[0].argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_float, ctypes.c_void_p] + [ctypes.c_int] * 2
            glue32[1].argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int, ctypes.c_void_p] + [ctypes.c_int] * 2
            glue32[2].argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_long] + [ctypes.c_void_p] * 3 \
                + [ctypes.c_int] * 3
        self._glue_fns = {torch.float32: tuple(glue32) if all(fn is not None for fn in glue32) else None,
                          torch.bfloat16: (self._rmsnorm, self._silu_mul, self._rope) if self._rmsnorm else None}
        library.foretell_lanes.restype = ctypes.c_int
        self.lanes: int = library.foretell_lanes()  # fp32 lanes per vector in this build: 16 (AVX-512) or 8 (AVX2)

    @property
    def bf16dot(self) -> bool:
        """Whether bf16 inputs are multiplied natively (VDPBF16PS) rather than widened to fp32."""
        return self._dot is not None

    @property
    def amx(self) -> bool:
        """Whether bf16 inputs with bf16 weights run on AMX tiles (``foretell_linear_amx``) for every weight whose
        rows hold a multiple of 32 values, instead of on VDPBF16PS: rows still independent, other bits."""
        return self._amx is not None

    def without_amx(self) -> CpuGemm:
        """This kernel with its AMX routes off: bf16 rows on VDPBF16PS, as on a CPU without AMX."""
        other = copy.copy(self)
        other._amx = other._attention_amx = other._head_bounds = None  # the int8 head's AVX2 route stays
        return other

    @property
    def glue(self) -> bool:
        """Whether this build has :meth:`rmsnorm`, :meth:`silu_mul` and :meth:`rope` for bf16 rows (AVX-512 with BW
        and VL)."""
        return self.glues(torch.bfloat16)

    def glues(self, dtype: torch.dtype) -> bool:
        """Whether :meth:`rmsnorm`, :meth:`silu_mul` and :meth:`rope` take rows of ``dtype`` in this build (fp32:
        every build; bf16: AVX-512 with BW and VL)."""
        return self._glue_fns.get(dtype) is not None

    def _glue(self, dtype: torch.dtype, step: str) -> tuple:
        fns = self._glue_fns.get(dtype)
        if fns is None:
            raise TypeError(f"this build of foretell's CPU kernel has no {step} for {dtype} rows (bf16 needs "
                            "AVX-512 BW/VL; fp32 any build)")
        return fns

    def rmsnorm(self, h: torch.Tensor, weight: torch.Tensor, eps: float,
                residual: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Qwen2's (and Llama's) RMSNorm of bf16 or fp32 rows, each row alone: ``(h', y)`` with h' = ``h``, or ``h +
        residual`` (the bits of torch's addition in that dtype), and y = ``weight`` · (h' / sqrt(mean(h'²) +
        ``eps``)), rounded where torch's module rounds in that dtype (bf16: the normalised row and y). The sum of
        squares is this kernel's own, so y may differ from torch's module in the last bit of a few values; a row's
        bits do not depend on the other rows."""
        fn = self._glue(h.dtype, "RMSNorm")[0]
        if weight.dtype != h.dtype or weight.shape != h.shape[-1:]:
            raise TypeError("rmsnorm takes rows and a weight of the rows' dtype and width")
        h = h.contiguous()
        k = h.shape[-1]
        y = torch.empty(h.shape, dtype=h.dtype)
        weight = weight.contiguous()
        if residual is None:
            fn(h.data_ptr(), None, None, weight.data_ptr(), eps, y.data_ptr(), h.numel() // k, k)
            return h, y
        if residual.shape != h.shape or residual.dtype != h.dtype:
            raise TypeError("the residual must be rows of the same shape and dtype")
        residual = residual.contiguous()
        total = torch.empty(h.shape, dtype=h.dtype)
        fn(h.data_ptr(), residual.data_ptr(), total.data_ptr(), weight.data_ptr(), eps, y.data_ptr(),
           h.numel() // k, k)
        return total, y

    def silu_mul(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        """SiLU(``gate``) · ``up`` for two bf16 or fp32 tensors of one shape (the gated MLP's activation, each value
        rounded where torch's ops round it in that dtype; the exponential is this kernel's own, so a few values may
        differ from torch's in the last bit). Views with rows a fixed stride apart (a joined gate/up result's halves)
        are read in place."""
        fn = self._glue(gate.dtype, "SiLU")[1]
        if up.dtype != gate.dtype or gate.shape != up.shape:
            raise TypeError("silu_mul takes two tensors of one dtype and shape")
        n, shape = gate.shape[-1], gate.shape
        gate, up = _rows(gate), _rows(up)
        if gate.stride(-2) != up.stride(-2):
            gate, up = gate.contiguous(), up.contiguous()
        y = torch.empty(shape, dtype=gate.dtype)
        fn(gate.data_ptr(), up.data_ptr(), gate.stride(-2), y.data_ptr(), gate.numel() // n, n)
        return y

    def rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """transformers' rotary embedding of bf16 or fp32 ``x`` [1, heads, rows, D] (a view of a projection's output:
        any strides but the last), with ``cos``/``sin`` [1, rows, D] of its dtype: ``x * cos + rotate_half(x) *
        sin``, every product and sum rounded as torch's ops round them in that dtype, so the same bits, in one call
        instead of seven ops. Returns a contiguous [1, heads, rows, D] tensor."""
        fn = self._glue(x.dtype, "rotary embedding")[2]
        if x.dim() != 4 or x.shape[0] != 1 or x.stride(-1) != 1 or x.shape[-1] % 2:
            raise TypeError("rope takes [1, heads, rows, D] with unit stride along D (D even)")
        _, heads, rows, dim = x.shape
        cos, sin = cos.reshape(rows, dim), sin.reshape(rows, dim)
        if cos.dtype != x.dtype or sin.dtype != x.dtype:
            raise TypeError("rope takes cos and sin of the rows' dtype")
        cos, sin = cos.contiguous(), sin.contiguous()
        out = torch.empty(1, heads, rows, dim, dtype=x.dtype)
        fn(x.data_ptr(), x.stride(2), x.stride(1), cos.data_ptr(), sin.data_ptr(), out.data_ptr(), heads, rows, dim)
        return out

    @property
    def int8(self) -> bool:
        """Whether this build has :meth:`linear_int8` (AVX512-VNNI, or AVX2 with FMA and F16C)."""
        return self._linear_q8 is not None

    @property
    def int8_many_rows(self) -> bool:
        """Whether this build has the int8 route's many-row kernel and its panels (:meth:`gemm_int8`,
        :meth:`panels`; AVX512-VNNI). An AVX2 build computes every pass's rows with :meth:`linear_int8`."""
        return self._gemm_q8 is not None

    def int8_takes(self, blocks: GgufWeight | None) -> bool:
        """Whether :meth:`linear_int8` takes ``blocks``: Q5_0, Q8_0, Q4_K or Q6_K rows of a multiple of 64 values."""
        return self.int8 and blocks is not None and blocks.fmt in INT8_FORMATS and blocks.shape[1] % 64 == 0

    def decode_blocks(self, blocks: GgufWeight, first: int = 0, count: int | None = None) -> torch.Tensor:
        """float32 [count, K]: the GGUF file's values of rows ``first`` to ``first + count`` (default: to the end) of
        ``blocks`` (ggml's reference decoder), what :meth:`linear_int8` multiplies by."""
        if not self.int8_takes(blocks):
            raise TypeError("decode_blocks takes Q5_0, Q8_0, Q4_K or Q6_K blocks on a build with the int8 route")
        n, k = blocks.shape
        count = n - first if count is None else count
        if first < 0 or count < 0 or first + count > n:
            raise ValueError(f"rows {first}..{first + count} are not rows of a [{n}, {k}] weight")
        out = torch.empty(count, k, dtype=torch.float32)
        self._q8_decode(blocks.data.data_ptr(), blocks.fmt, first, count, k, out.data_ptr())
        return out

    def linear_int8(self, x: torch.Tensor, blocks: GgufWeight, bias: torch.Tensor | None = None,
                    out: torch.Tensor | None = None) -> torch.Tensor:
        """float32 ``x`` W^T (+ ``bias``) for the weight W that ``blocks`` hold, computed as llama.cpp computes a
        quantized model: each row of ``x`` cut into blocks of 32 values, each scaled to int8 (by max |x| / 127),
        the int8 products of a block summed exactly in int32 (VPDPBUSD; VPMADDUBSW on AVX2), then scaled by the
        two blocks' scales in
        fp32. Not the bits of :meth:`linear` (nor its values exactly: int8 inputs), but every row's result depends
        on its own input row alone, in every call. Rows with an inf or NaN give NaN. Returns float32 [*, N]; ``out``:
        a float32 buffer of at least rows x N values to write into (the result is a view of it), as for
        :meth:`logits`."""
        n, k = blocks.shape
        if not self.int8_takes(blocks) or x.shape[-1] != k:
            raise ValueError(f"linear_int8 takes rows of {k} values and blocks it reads (int8_takes)")
        rows = x.reshape(-1, k).float().contiguous()
        m = rows.shape[0]
        if out is None:
            result = torch.empty(m, n, dtype=torch.float32)
        elif out.dtype != torch.float32 or out.device.type != "cpu" or not out.is_contiguous() or out.numel() < m * n:
            raise ValueError(f"out must be a contiguous float32 CPU buffer of at least {m * n} values")
        else:
            result = out.view(-1)[: m * n].view(m, n)
        if bias is not None and (bias.dtype != torch.float32 or bias.shape != (n,) or not bias.is_contiguous()):
            raise ValueError(f"linear_int8 takes a contiguous float32 bias of {n} values")
        if m:
            code = self._linear_q8(rows.data_ptr(), blocks.data.data_ptr(), blocks.fmt,
                                   bias.data_ptr() if bias is not None else None, result.data_ptr(), m, n, k,
                                   torch.get_num_threads())
            if code == -2:  # an inf or NaN in some row: NaN where it is, the others computed alone
                for i in range(m):
                    one = result[i : i + 1]
                    if self._linear_q8(rows[i : i + 1].data_ptr(), blocks.data.data_ptr(), blocks.fmt,
                                       bias.data_ptr() if bias is not None else None, one.data_ptr(), 1, n, k,
                                       torch.get_num_threads()) != 0:
                        one.fill_(float("nan"))
            elif code != 0:
                raise RuntimeError(f"foretell_linear_q8 failed ({code})")
        return result.reshape(*x.shape[:-1], n)

    @property
    def p8_fused_rows(self) -> int:
        """Passes on panels of up to this many rows (half as many for Q6_K) read them straight into registers
        (``cpu_gemm.c``, ``p8_tile``: no buffer per tile; the 0.5B's Q5_0, Q4_K and Q6_K layers at one row
        0.64-0.85x the time on a 2-core Cascade Lake, 16 rows 0.85-0.99x, 32 rows 0.98-1.24x); the same bits as
        through the buffer. A one-token pass of the 0.5B: 0.87x."""
        return self._p8_fused_rows.value if self._p8_fused_rows is not None else 0

    @p8_fused_rows.setter
    def p8_fused_rows(self, rows: int) -> None:
        if self._p8_fused_rows is not None:
            self._p8_fused_rows.value = max(0, int(rows))

    def panels(self, blocks: GgufWeight) -> GgufWeight | None:
        """``blocks`` (the file's) laid out as panels: per 16 weight rows, their values in the order
        ``foretell_gemm_q8``'s tiles read them and in as many bits as the file's, then their scales (``cpu_gemm.c``,
        ``foretell_pack_p8``); as many bytes (Q4_K: 148 per 256 values, against 144). :meth:`linear_int8` and
        :meth:`gemm_int8` then run every pass on ``foretell_gemm_q8``'s tiles, one row or many, so a row's result
        is that of :meth:`gemm_int8` on the file's blocks. None where the build or the weight does not take them
        (rows not a multiple of 16, panels already)."""
        n, k = blocks.shape
        if self._pack_p8 is None or blocks.fmt >= PANELS or not self.int8_takes(blocks) or n % 16:
            return None
        values, nbytes = GGUF_BLOCKS[PANELS + blocks.fmt]
        out = torch.empty(n * k // values * nbytes, dtype=torch.uint8)
        if self._pack_p8(blocks.data.data_ptr(), blocks.fmt, n, k, out.data_ptr(), torch.get_num_threads()) != 0:
            return None
        return GgufWeight(PANELS + blocks.fmt, out, blocks.shape)

    def gemm_int8(self, x: torch.Tensor, blocks: GgufWeight, bias: torch.Tensor | None = None) -> torch.Tensor | None:
        """float32 ``x`` W^T (+ ``bias``) for many rows (a prompt chunk), from the same int8 quantities as
        :meth:`linear_int8` (the file's integers, each input row's blocks of 32 values scaled to int8) in a layout
        for many rows (``foretell_gemm_q8``): 1.4-2x the library's fp32 GEMM at 512 rows on a 2-core Cascade Lake.
        Its float sums run in another order than :meth:`linear_int8`'s, so not its bits; but each row's result
        depends on that row alone. None where it does not take the call (an inf or NaN in some row, a width it
        does not read): the caller computes those rows otherwise."""
        n, k = blocks.shape
        if self._gemm_q8 is None or not self.int8_takes(blocks) or x.shape[-1] != k or n % 16:
            return None
        rows = x.reshape(-1, k).float().contiguous()
        if bias is not None and (bias.dtype != torch.float32 or bias.shape != (n,) or not bias.is_contiguous()):
            raise ValueError(f"gemm_int8 takes a contiguous float32 bias of {n} values")
        result = torch.empty(rows.shape[0], n, dtype=torch.float32)
        if rows.shape[0] and self._gemm_q8(rows.data_ptr(), blocks.data.data_ptr(), blocks.fmt,
                                           bias.data_ptr() if bias is not None else None, result.data_ptr(),
                                           rows.shape[0], n, k, torch.get_num_threads()) != 0:
            return None
        return result.reshape(*x.shape[:-1], n)

    @property
    def reads_blocks(self) -> bool:
        """Whether :meth:`linear` can read a weight's GGUF blocks (:class:`GgufWeight`) for bf16 inputs."""
        return self._linear_q is not None

    def decodes(self, blocks: GgufWeight | None) -> bool:
        """Whether :meth:`linear` can read ``blocks`` (a build with AVX512-BF16, a format of :data:`BF16_FORMATS`)."""
        return self.reads_blocks and blocks is not None and blocks.fmt in BF16_FORMATS

    def dequantize(self, blocks: GgufWeight) -> torch.Tensor:
        """The bf16 weight [N, K] that the kernel decodes from ``blocks`` (what :meth:`linear` multiplies by)."""
        if not self.decodes(blocks):
            raise TypeError("this build of foretell's CPU GEMM does not decode these GGUF blocks to bf16 (no "
                            "AVX512-BF16, or a format not in BF16_FORMATS)")
        n, k = blocks.shape
        out = torch.empty(n, k, dtype=torch.bfloat16)
        self._dequantize(blocks.data.data_ptr(), blocks.fmt, 0, n, k, out.data_ptr())
        return out

    def linear(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
               blocks: GgufWeight | None = None) -> torch.Tensor:
        """``F.linear(x, weight, bias)``. ``blocks``: the same weight as GGUF blocks that decode to exactly
        ``weight`` (checked by the caller with :meth:`dequantize`), read instead for bf16 passes of up to
        :data:`BLOCK_ROWS_MAX` rows: the same bits from fewer bytes."""
        out = self._run(x, weight, bias, None, rounded=False, blocks=blocks, bf16_out=x.dtype == torch.bfloat16)
        return out.reshape(*x.shape[:-1], weight.shape[0]).to(x.dtype)

    def linear_blocks(self, x: torch.Tensor, blocks: GgufWeight, bias: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`linear` on ``blocks`` alone, for bf16 passes of at most :data:`BLOCK_ROWS_MAX` rows (the rows
        that read blocks): no bf16 weight needed, e.g. for several layers' blocks laid end to end. ``bias``:
        float32 [N] or None."""
        n, k = blocks.shape
        rows = x.reshape(-1, k).contiguous()
        m = rows.shape[0]
        if not self.decodes(blocks) or x.dtype != torch.bfloat16 or not 0 < m <= BLOCK_ROWS_MAX:
            raise ValueError(f"linear_blocks takes 1-{BLOCK_ROWS_MAX} bf16 rows on a build that reads blocks, and "
                             f"blocks of BF16_FORMATS")
        if bias is not None and (bias.dtype != torch.float32 or bias.shape != (n,) or not bias.is_contiguous()):
            raise ValueError(f"linear_blocks takes a contiguous float32 bias of {n} values")
        result = torch.empty(m, n, dtype=torch.float32)
        if not self._amx_run(rows, None, blocks, bias, result, rounded=False):
            self._linear_q(rows.data_ptr(), blocks.data.data_ptr(), blocks.fmt,
                           bias.data_ptr() if bias is not None else None, result.data_ptr(), m, n, k,
                           torch.get_num_threads(), 0)
        return result.reshape(*x.shape[:-1], n).to(x.dtype)

    def _amx_takes(self, k: int) -> bool:
        """Whether a weight whose rows hold ``k`` values runs on AMX tiles (its shape alone decides)."""
        return self._amx is not None and k % 32 == 0

    def _amx_run(self, rows: torch.Tensor, weight: torch.Tensor | None, blocks: GgufWeight | None,
                 bias: torch.Tensor | None, result: torch.Tensor, rounded: bool) -> bool:
        """``result`` = rows W^T (+ b) on AMX tiles from ``blocks`` (where given) or ``weight`` (bf16); False,
        with nothing written, where this build or the weight's shape does not take that route. The route depends
        on the weight's shape alone, so every call of a layer takes the same one."""
        k = rows.shape[1]
        if not self._amx_takes(k):
            return False
        n = result.shape[1]
        wq = None if blocks is None else blocks.data.data_ptr()
        fmt = 0 if blocks is None else blocks.fmt
        mode = 2 if result.dtype == torch.bfloat16 else int(rounded)  # 2: bf16 outputs, the rounded bits
        return self._amx(rows.data_ptr(), None if weight is None else weight.data_ptr(), wq, fmt,
                         bias.data_ptr() if bias is not None else None, result.data_ptr(), rows.shape[0], n, k,
                         torch.get_num_threads(), mode) == 0

    def logits(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
               out: torch.Tensor | None = None, blocks: GgufWeight | None = None) -> torch.Tensor:
        """``linear(x, weight, bias).float()`` for an output head, from one write: float32 ``[*, N]`` holding the
        values of ``x.dtype`` (bf16 inputs: each output rounded to bf16 in the kernel, as ``.to(bfloat16)``
        rounds). ``out``: a float32 buffer of at least rows x N values to write into (the result is a view of it),
        so a pass of many rows does not fault in fresh pages for its logits; None allocates. ``blocks`` as in
        :meth:`linear`."""
        if x.dtype not in (torch.float32, torch.bfloat16):
            return self.linear(x, weight, bias).float()
        result = self._run(x, weight, bias, out, rounded=x.dtype == torch.bfloat16, blocks=blocks)
        return result.reshape(*x.shape[:-1], weight.shape[0])

    def _run(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor | None,
             rounded: bool, blocks: GgufWeight | None = None, bf16_out: bool = False) -> torch.Tensor:
        """float32 [rows, N] = x W^T (+ b), each output rounded to bf16 where ``rounded``. ``bf16_out``: where the
        call runs on AMX tiles into a fresh result, that result is bf16 (the bits ``.to(bfloat16)`` gives the
        float32 one), written once: no float32 buffer to fault in and convert."""
        bf16_input = x.dtype == torch.bfloat16 and weight.dtype == torch.bfloat16
        fn = self._fns.get(weight.dtype)
        if (x.dtype != torch.float32 and not bf16_input) or fn is None or x.device.type != "cpu" \
                or weight.device.type != "cpu":
            raise TypeError("foretell's CPU GEMM takes fp32 CPU inputs with fp32 or bf16 CPU weights, or bf16 "
                            "inputs with bf16 weights")
        if bias is not None and bias.dtype not in (torch.float32, x.dtype):
            raise TypeError("foretell's CPU GEMM takes a bias of the input's dtype or fp32")
        n, k = weight.shape
        if x.shape[-1] != k:
            raise ValueError(f"input has {x.shape[-1]} features, the weight {k}")
        rows = x.reshape(-1, k)
        if bf16_input and self._dot is not None:
            fn = self._dot
        elif bf16_input:
            rows = rows.float()
        rows = rows.contiguous()
        weight = weight.contiguous()
        if bias is not None:
            bias = bias.float().contiguous()
        m = rows.shape[0]
        amx_out = bf16_out and out is None and fn is self._dot and self._amx_takes(k)
        if out is None:
            result = torch.empty(m, n, dtype=torch.bfloat16 if amx_out else torch.float32)
        elif out.dtype != torch.float32 or out.device.type != "cpu" or not out.is_contiguous() or out.numel() < m * n:
            raise ValueError(f"out must be a contiguous float32 CPU buffer of at least {m * n} values")
        else:
            result = out.view(-1)[: m * n].view(m, n)
        read_blocks = bool(m) and fn is self._dot and m <= BLOCK_ROWS_MAX and self.decodes(blocks)
        if read_blocks and blocks.shape != (n, k):
            raise ValueError(f"GGUF blocks of shape {blocks.shape} for a weight of shape {(n, k)}")
        if not m or (fn is self._dot and self._amx_run(rows, weight, blocks if read_blocks else None, bias, result,
                                                       rounded)):
            return result
        if result.dtype != torch.float32:  # AMX did not take it (blocks of a format it cannot read at this K)
            result = torch.empty(m, n, dtype=torch.float32)
        if read_blocks:
            self._linear_q(rows.data_ptr(), blocks.data.data_ptr(), blocks.fmt,
                           bias.data_ptr() if bias is not None else None, result.data_ptr(), m, n, k,
                           torch.get_num_threads(), int(rounded))
        else:
            fn(rows.data_ptr(), weight.data_ptr(), bias.data_ptr() if bias is not None else None,
               result.data_ptr(), m, n, k, torch.get_num_threads(), int(rounded))
        return result

    def attends(self, dtype: torch.dtype, head_dim: int) -> bool:
        """Whether :meth:`attention` takes queries and caches of this dtype and head size (fp32 or bf16, a head
        size of at most 16 vectors: 256 with AVX-512, 128 with AVX2)."""
        return dtype in self._attention and 0 < head_dim <= 16 * self.lanes

    def attends_on_amx(self, head_dim: int) -> bool:
        """Whether bf16 attention of this head size runs on AMX tiles (``foretell_attention_amx``: head sizes that
        are a multiple of 64), where it was faster than PyTorch's SDPA at every size measured."""
        return self._attention_amx is not None and head_dim % 64 == 0

    def attention(self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, first: list[int],
                  end: list[int], scale: float, tiles: torch.Tensor | None = None, valid: int = 0) -> torch.Tensor:
        """Attention for a sequence's queries (a prompt chunk, a decode token, drafts): ``query`` [H, T, D],
        ``keys``/``values`` a sequence's cache [G, capacity, D] (G divides H); query t sees keys
        ``first[t] <= j < end[t]``. Returns [H, T, D] in the query's dtype. Each query's result is computed alone,
        in a fixed order that depends only on its own keys: the same bits whatever the other queries of the call
        (see ``cpu_gemm.c``).

        ``tiles`` (fp32 only): the sequence's keys transposed tile by tile, [G, tiles, D, key_tile], kept between
        calls; the first ``valid`` positions hold the cache's keys already, and the call transposes the rest of
        those it reads into them (the same bits as without: only the copy is saved)."""
        if (not self.attends(query.dtype, query.shape[-1]) or keys.dtype != query.dtype or values.dtype != query.dtype
                or values.shape != keys.shape or not keys.is_contiguous() or not values.is_contiguous()
                or any(t.device.type != "cpu" for t in (query, keys, values))):
            raise TypeError("foretell's CPU attention takes fp32 or bf16 CPU tensors and contiguous caches")
        heads, n, dim = query.shape
        kv_heads, capacity = keys.shape[0], keys.shape[1]
        if heads % kv_heads or len(first) != n or len(end) != n or not all(0 <= f < e <= capacity
                                                                           for f, e in zip(first, end)):
            raise ValueError("attention: bad heads or key ranges")
        query = query.contiguous()
        bounds = torch.tensor([first, end], dtype=torch.int32)
        out = torch.empty(heads, n, dim, dtype=torch.float32)
        args = (query.data_ptr(), keys.data_ptr(), values.data_ptr(), out.data_ptr(), bounds[0].data_ptr(),
                bounds[1].data_ptr(), n, heads, kv_heads, dim, capacity * dim, scale, torch.get_num_threads())
        if tiles is not None:
            tile = self.key_tile
            if (query.dtype != torch.float32 or tiles.dtype != torch.float32 or not tiles.is_contiguous()
                    or tiles.shape[0] != kv_heads or tiles.shape[2:] != (dim, tile)
                    or tiles.shape[1] * tile < -(-max(end) // tile) * tile or not 0 <= valid <= max(end)):
                raise ValueError("attention: tiled keys that do not fit the cache, or valid past its keys")
            self._attention_tiles(*args, tiles.data_ptr(), tiles.shape[1] * tile, valid)
            return out
        if query.dtype == torch.bfloat16 and self.attends_on_amx(dim) and self._attention_amx(*args) == 0:
            return out.to(query.dtype)
        fn = self._attention[query.dtype]
        if query.dtype == torch.bfloat16 and self._attention_dot is not None and dim % 32 == 0:
            fn = self._attention_dot
        fn(*args)
        return out.to(query.dtype)


class ArgmaxHead:
    """An output head's argmax for rows whose caller needs nothing else (greedy requests without logprobs, logit
    bias or penalties), from half the bytes: an int8 copy of the head bounds every logit from above and below
    (``foretell_head_bounds_amx``, AMX int8 tiles), and only the logits whose upper bound reaches the largest
    lower bound are computed exactly, by the head's own kernel on those weight rows (the same bits: a row's
    result depends on its weight row and input row alone).

    :meth:`logits` returns a row of float32 values whose argmax is the exact head's, ties included: the exact
    logit at every candidate, and at every other column its upper bound, which lies below the row's largest
    exact logit. The bounds are rigorous (``cpu_gemm.c``: the int8 and int16 quantisation errors, the exact
    kernel's fp32 sums and its rounding to bf16, float rounding); over 1,200 positions of a real file on the
    0.5B's head, the median row had 1 candidate, the largest 14.

    A one-token pass of the 0.5B reads its 272 MB head, a sixth of its time on the Sapphire Rapids VM; this reads
    136 MB. Two routes, by what the build has: AMX int8 tiles (the copy packed in tile order, bf16 inputs), else
    VPMADDWD on AVX2 (the copy row by row, bf16 or fp32 inputs: exact mode in fp32 reads a bf16 copy of the head).
    Passes of more than :attr:`rows_max` rows (16 on tiles, beyond which they are compute-bound: as many tile
    products either way; 2 on AVX2, compute-bound from 4 rows on) take the
    exact head, as do passes with more than :attr:`CANDIDATES_MAX` candidates (a nearly flat distribution, e.g.
    after a context of random tokens: the bound is about one logit wide), and then the next 1, 2, 4 … 64 passes.
    """

    ROWS_MAX = 16  # on AMX tiles; the AVX2 route, compute-bound from 4 rows on, takes passes of up to 2 rows
    ROWS_MAX_AVX2 = 2
    CANDIDATES_MAX = 2048  # more candidates than this (a flat distribution): the exact head is cheaper

    def __init__(self, gemm: CpuGemm, weight: torch.Tensor, chunk_rows: int = 8192):
        n, k = weight.shape
        if not self.supports(gemm, weight):
            raise ValueError("ArgmaxHead needs a bf16 head whose shape is a multiple of 16 x 64 (AMX int8 tiles) or "
                             "16 x 16 (AVX2)")
        self.gemm, self.shape = gemm, (n, k)
        self.tiles = gemm._head_bounds is not None and k % 64 == 0
        self.rows_max = self.ROWS_MAX if self.tiles else self.ROWS_MAX_AVX2
        scales = torch.empty(n, dtype=torch.float32)
        a = torch.empty(n, dtype=torch.float32)
        c = torch.empty(n, dtype=torch.float32)
        packed = torch.empty(n // 16, k // 64, 16, 16, 4, dtype=torch.int8) if self.tiles else \
            torch.empty(n, k, dtype=torch.int8)
        sum_error = k * 2.0**-24 * 1.01  # the exact kernel's fp32 sums over k products, relative to sum |w x|
        for start in range(0, n, chunk_rows):
            w = weight[start : start + chunk_rows].float()  # bf16 values: exact
            peak = w.abs().amax(dim=1)
            scale = torch.where(peak > 0, peak / 127, torch.ones_like(peak))
            q = torch.round(w / scale[:, None]).clamp_(-127, 127)
            # |w - scale q| <= scale (1/2 + |w / scale - fl(w / scale)|) <= scale (1/2 + 2^-24 127): no residual pass
            scales[start : start + len(w)] = scale
            a[start : start + len(w)] = ((scale.double() * (0.5 + 1e-5) + sum_error * peak.double()) * (1 + 1e-6)).float()
            c[start : start + len(w)] = (scale.double() * q.abs().sum(dim=1).double() * (1 + 1e-6)).float()
            if self.tiles:  # per 16 rows and 64 values: 16 quads of values x 16 rows x 4 bytes (B tiles)
                blocks = q.to(torch.int8).reshape(-1, 16, k // 64, 16, 4).permute(0, 2, 3, 1, 4)
                packed[start // 16 : (start + len(w)) // 16] = blocks
            else:
                packed[start : start + len(w)] = q.to(torch.int8)
        self.packed, self.scales, self.a, self.c = packed.contiguous(), scales, a, c
        self._backoff, self._skip = 1, 0  # after a pass with too many candidates, skip passes (doubling, to 64)

    @staticmethod
    def supports(gemm: CpuGemm | None, weight: torch.Tensor) -> bool:
        """Whether this build and ``weight`` (a bias-free head's) take the route."""
        if gemm is None or weight.dtype != torch.bfloat16 or weight.dim() != 2 or weight.shape[0] % 16:
            return False
        k = weight.shape[1]
        return (gemm._head_bounds is not None and k % 64 == 0 and k <= 4096) or \
            (gemm._head_bounds_int8 is not None and k % 16 == 0 and k <= 16384)

    @property
    def nbytes(self) -> int:
        return self.packed.numel() + 3 * 4 * self.shape[0]

    def logits(self, x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor | None:
        """float32 [rows, N] whose argmax is ``gemm.logits(x, weight)``'s (``weight``: the head's bf16 weights, of
        which this holds the int8 copy); None where this route does not take ``x`` (more than :attr:`rows_max`
        rows, non-finite inputs, too many candidates): the caller then runs the exact head. ``out``: a float32
        buffer of at least rows x N values, as for :meth:`CpuGemm.logits`."""
        n, k = self.shape
        rows = x.reshape(-1, k)
        m = rows.shape[0]
        if x.dtype != (torch.bfloat16 if self.tiles else x.dtype) or x.dtype not in (torch.bfloat16, torch.float32) \
                or not 0 < m <= self.rows_max:
            return None
        if self._skip:  # a flat distribution (a context of random tokens, say) leaves too many candidates: the
            self._skip -= 1  # bounds then only add to the exact head's time; try again after a few passes
            return None
        rows = rows.contiguous()
        bounds_of = self.gemm._head_bounds if self.tiles else self.gemm._head_bounds_int8
        inputs = rows if self.tiles else rows.float()
        result = (torch.empty(m * n, dtype=torch.float32) if out is None else out.reshape(-1)[: m * n]).view(m, n)
        lower = torch.empty(m, dtype=torch.float32)
        top = torch.empty(m, n // 16, dtype=torch.float32)  # the largest upper bound of each 16 columns
        if bounds_of(inputs.data_ptr(), self.packed.data_ptr(), self.scales.data_ptr(), self.a.data_ptr(),
                     self.c.data_ptr(), result.data_ptr(), top.data_ptr(), lower.data_ptr(), m, n, k,
                     torch.get_num_threads()) != 0:
            return None
        floor = lower.numpy()[:, None]
        blocks = np.flatnonzero((top.numpy() >= floor).any(axis=0))
        columns = (blocks[:, None] * 16 + np.arange(16)).ravel()
        columns = columns[(result.numpy()[:, columns] >= floor).any(axis=0)] if len(blocks) <= self.CANDIDATES_MAX else blocks
        if not 0 < len(columns) <= self.CANDIDATES_MAX:
            self._skip, self._backoff = self._backoff, min(2 * self._backoff, 64)
            return None
        self._backoff = 1
        index = torch.from_numpy(columns)
        result[:, index] = self.gemm.logits(rows, weight.index_select(0, index))
        return result.reshape(*x.shape[:-1], n)


def _rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` as rows a fixed stride apart with unit stride within a row (2-d or more): itself where it already is,
    else a contiguous copy."""
    if t.dim() < 2:
        t = t.reshape(1, -1)
    lead = 1
    for size in t.shape[:-2]:
        lead *= size
    if t.stride(-1) == 1 and (lead == 1 or t.is_contiguous()) and t.stride(-2) >= t.shape[-1]:
        return t
    return t.contiguous()


def exact_bf16(weight: torch.Tensor) -> torch.Tensor | None:
    """``weight`` as bf16 where every value is exactly a bf16 (a model converted from bf16 or a quantized file
    and loaded in fp32), else None: the narrow copy then computes the very same products."""
    narrow = weight.detach().to(torch.bfloat16)
    return narrow if torch.equal(narrow.float(), weight.detach()) else None


def supported_cpu() -> bool:
    """Whether this CPU has the instructions the kernel is written for (AVX-512F, or AVX2 with FMA)."""
    capability = torch.backends.cpu.get_cpu_capability()
    if capability.startswith("AVX512"):
        return True
    if capability != "AVX2":
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " fma " in flags or flags.rstrip().endswith(" fma")


def _torch_lib() -> Path:
    return Path(torch.__file__).parent / "lib"


def _compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def _build(cache_dir: Path, flags: tuple[str, ...] = FLAGS) -> Path:
    """Compile the kernel into ``cache_dir`` (once per source, flags, compiler and torch) and return the library.
    ``flags``: the compiler's (tests build the AVX2 variant on any x86 CPU with ``-march=haswell``)."""
    compiler = _compiler()
    if compiler is None:
        raise RuntimeError("no C compiler (cc) found")
    source = SOURCE.read_bytes()
    torch_lib = _torch_lib()
    key = hashlib.sha256(b"|".join([source, " ".join(flags).encode(), compiler.encode(), torch.__version__.encode(),
                                    str(torch_lib).encode(), _cpu_model().encode()])).hexdigest()[:16]
    target = cache_dir / "kernels" / key / "libforetell_gemm.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    cmd = [compiler, *flags, str(SOURCE), "-o", str(tmp), f"-L{torch_lib}", f"-Wl,-rpath,{torch_lib}"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {result.stderr.strip()[:500]}")
    os.replace(tmp, target)  # atomic: a concurrent build of the same key writes the same bytes
    return target


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "flags")):
                return line
    except OSError:
        pass
    return torch.backends.cpu.get_cpu_capability()


@lru_cache(maxsize=1)
def load() -> CpuGemm | None:
    """The kernel, built on first use; None where it cannot run here (reason logged once)."""
    if os.environ.get("FORETELL_CPU_GEMM", "1") == "0":
        return None
    if not sys.platform.startswith("linux") or not supported_cpu():
        log.info("foretell's CPU GEMM: not used on this platform/CPU (%s)", torch.backends.cpu.get_cpu_capability())
        return None
    from foretell.paths import cache_dir

    try:
        path = _build(cache_dir())
        gemm = CpuGemm(ctypes.CDLL(str(path)), path, amx=os.environ.get("FORETELL_CPU_AMX", "1") != "0")
        _check(gemm)
    except Exception as exc:  # noqa: BLE001 - any failure means: keep the library kernels
        log.warning("foretell's CPU GEMM is not available, the library kernels are used: %s", exc)
        return None
    return gemm


def _check(gemm: CpuGemm) -> None:
    """Refuse a build that computes wrong results (a broken compiler or runtime)."""
    gen = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(*s, generator=gen) for s in ((5, 37), (9, 37), (9,)))
    w = w.bfloat16().float()
    expected = torch.nn.functional.linear(x.double(), w.double(), b.double()).float()
    got = gemm.linear(x, w, b)
    if not torch.allclose(got, expected, atol=1e-4, rtol=1e-4):
        raise RuntimeError("the built kernel's results differ from torch's")
    if not torch.equal(gemm.linear(x, w.bfloat16(), b), got):
        raise RuntimeError("the built kernel's bf16-weight results differ from its fp32 ones")
    if gemm.amx:  # bf16 rows on AMX tiles: right, and each row the same bits alone
        x, w = torch.randn(5, 64, generator=gen).bfloat16(), torch.randn(9, 64, generator=gen).bfloat16()
        expected = torch.nn.functional.linear(x.double(), w.double(), b.double())
        got = gemm.logits(x, w, b)
        if not torch.allclose(got.double(), expected, atol=3e-2, rtol=1e-2) \
                or not torch.equal(gemm.logits(x[2:3], w, b), got[2:3]):
            raise RuntimeError("the built kernel's AMX results differ from torch's")
