import json, sys
a=json.load(open(f'/tmp/rows-{sys.argv[1]}.json')); b=json.load(open(f'/tmp/rows-{sys.argv[2]}.json'))
th = float(sys.argv[3]) if len(sys.argv) > 3 else 0.02
for x,y in zip(a,b):
    if abs(x[4]-y[4])>th: print(f"{x[0]:9s} {x[1]:15s} ngram {x[2]:6.1f} pred {x[3]:6.1f} -> {y[3]:6.1f}  ratio {x[4]:.3f} -> {y[4]:.3f} passes {x[6]} -> {y[6]}")
