import time, statistics, torch
exec(open("tmp/argmax_head_check.py").read().split("t0 = time.perf_counter(); head")[0])
g2 = g.without_amx()
head = cpu_gemm.ArgmaxHead(g2, W)
print("tiles", head.tiles)
xs = torch.load("/tmp/hidden.pt")
for dtype in (torch.bfloat16, torch.float32):
    for m in (1, 2, 4, 8, 16):
        x = xs[:m].to(dtype).contiguous()
        te, ta = [], []
        for r in range(9):
            t0 = time.perf_counter(); g2.logits(x, W); te.append(time.perf_counter() - t0)
            t0 = time.perf_counter(); assert head.logits(x, W) is not None; ta.append(time.perf_counter() - t0)
        print(f"{dtype} rows {m}: exact {statistics.median(te)*1e3:.2f} ms  int8 {statistics.median(ta)*1e3:.2f} ms", flush=True)
