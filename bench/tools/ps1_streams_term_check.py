#!/usr/bin/env python3
"""Exploratory check behind bench/PERFORMANCE.md 9.16: which extra term would let ps-1's model follow its own
calibration runs at N = 12-16 and 20-45 ms? A Python re-implementation of ps-1's shaped-link terms (2L + the
larger of link and window time, each with the window queueing q) is grid-fitted on the ps-1 runs of
bench/results/committed_runs.json with no term, and with three candidates. Exploratory: in-sample, a coarse grid,
not the C++ fit; a candidate must go into bench/model/collective.h, be fitted by //bench:calibrate --refit, and
be judged on a new held-out plan. Run from anywhere: python3 bench/tools/ps1_streams_term_check.py"""
import json, math, itertools
import os
HERE=os.path.dirname(os.path.abspath(__file__))
runs=[r for r in json.load(open(os.path.join(HERE,'..','results','committed_runs.json')))['runs'] if r['exchange']=='ps-1' and r.get('link_bytes_per_second')]
def T(r, eff, W, q, c, form):
    n=r['nodes'];S=r['bytes'];B=r['link_bytes_per_second'];L=r.get('latency_s',0)
    eb=eff*B; link=n*S/eb; win=S*2*L/W if L>0 else 0
    b=min(1,2*L*eb/W) if L>0 else 0
    Q=q*b*(n-1)*S/eb
    base=2*L+max(link+Q, win+Q if win>0 else 0)
    if form=='none': k=0
    elif form=='min_n':   # c * (N-1)/N * min(link,win)... scaled by N
        k=c*(n-1)*min(link,win)/16
    elif form=='knee':    # c * N * min/max ratio^? 
        k=c*(n-1)*min(link,win)**2/max(link,win)/16 if win>0 else 0
    elif form=='lat_n':   # c * (N-1) * L  per-stream round trip
        k=c*(n-1)*2*L
    return base+k
def rms(params, form):
    e=[math.log(r['seconds']/T(r,*params,form)) for r in runs]
    return math.sqrt(sum(x*x for x in e)/len(e)), max(abs(x) for x in e)
best={}
for form in ['none','min_n','knee','lat_n']:
    bestv=None
    for eff in [0.9,0.93,0.96,0.98,1.0]:
      for W in [60e3,68e3,76e3,84e3,92e3]:
        for q in [0,0.05,0.1,0.15,0.2,0.25]:
          for c in ([0] if form=='none' else [0,0.05,0.1,0.15,0.2,0.3,0.4,0.6]):
            v=rms((eff,W,q,c),form)
            if bestv is None or v[0]<bestv[0][0]: bestv=(v,(eff,W,q,c))
    print(form, 'rms %.1f%% max %.1f%%'%(100*bestv[0][0],100*bestv[0][1]), 'eff %.2f W %.0fK q %.2f c %.2f'%(bestv[1][0],bestv[1][1]/1024,bestv[1][2],bestv[1][3]))
