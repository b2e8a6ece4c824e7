#!/usr/bin/env python3
"""Exploratory check behind bench/PERFORMANCE.md 9.8: would a smooth maximum of the PS link and window terms,
2L + (link^p + window^p)^(1/p), follow the 16-core high-latency runs better than the model's max? Each PS
exchange's window is refitted per p on plan 1's runs (efficiencies from bench/results/committed_model.json) and
judged on plan 2's. Reads the two validation reports; run from the repository root: python3 bench/tools/smooth_max_check.py"""
import json, re, statistics
B=150e6/8
MODEL=json.load(open('bench/results/committed_model.json'))
eff={e['exchange']:e['efficiency']['value'] for e in MODEL['exchanges'] if e['exchange']!='ring'}
W0={e['exchange']:e['window_bytes']['value'] for e in MODEL['exchanges'] if e['exchange']!='ring'}
def runs(f):
    out=[]
    for l in open(f):
        m=re.match(r'\s+150mbit (\d+)ms N=(\d+) (\d+)MiB\s+(\S+)\s+([\d.]+) \[[^\]]*\]\s+([\d.]+)',l)
        if m:
            L=int(m.group(1))/1e3;N=int(m.group(2));S=int(m.group(3))*2**20;ex=m.group(4)
            out.append((ex,L,N,S,float(m.group(5)),float(m.group(6))))
    return out
def comps(ex,L,N,S):
    if ex=='ps-1': lb,fb=N*S,S
    elif ex=='ps-dedicated': lb,fb=max(S,N*S/2),S/2
    elif ex=='ps-colocated': lb,fb=2*(N-1)/N*S,S/N
    return lb/(eff[ex]*B), fb*2*L
def pred(ex,L,N,S,W,p):
    link,wnum=comps(ex,L,N,S); win=wnum/W
    if p is None: return 2*L+max(link,win)
    return 2*L+(link**p+win**p)**(1/p)
p1=[r for r in runs('bench/results/validation_high_latency_16core_h200host_2026-11-27.txt') if r[0]!='ring']
p2=[r for r in runs('bench/results/validation_high_latency_n16_16core_h200host_2026-11-27.txt') if r[0]!='ring']
def errs(rs,W,p): return [ (pred(*r[:4],W[r[0]],p)-r[5])/r[5] for r in rs]
def summ(e):
    a=sorted(abs(x)*100 for x in e); k=(len(a)-1)*0.9; f=int(k); 
    return round(statistics.median(a),1), round(a[f]+(a[min(f+1,len(a)-1)]-a[f])*(k-f),1), round(max(a),1)
print('committed max: plan1',summ(errs(p1,W0,None)),'plan2',summ(errs(p2,W0,None)))
best=None
for p in [1,1.25,1.5,2,3,4,6,None]:
    # fit one W scale per exchange on plan 1 (least squares on relative error)
    W={}
    for ex in W0:
        rs=[r for r in p1 if r[0]==ex]
        cands=[W0[ex]*s for s in [0.5+0.01*i for i in range(200)]]
        W[ex]=min(cands,key=lambda w: sum(x*x for x in errs(rs,{ex:w},p)))
    e1=errs(p1,W,p); e2=errs(p2,W,p)
    print('p',p,'W',{k:round(v/1024) for k,v in W.items()},'plan1 (fit)',summ(e1),'plan2 (judged)',summ(e2))
