#!/usr/bin/env python3
"""Exploratory check behind bench/PERFORMANCE.md 9.17: which form of the ring's realized burst credit would let
its model follow its own calibration runs at large N and latency? A Python re-implementation of the ring's
shaped-link wire term (bench/model/collective.cc: the dependency chain and the link chain, the larger) is
grid-fitted on the ring's shaped-link runs of bench/results/committed_runs.json with three credit forms:

  flat    credit = k min(burst, L eB)                        (the committed model's burst_share)
  ratio   credit = k min(burst, L eB) min(1, (u / (L eB))^a)  (a chunk small against the link's BDP realizes less)
  ratioN  the same times (4 / max(N, 4))^0.5                  (and fewer at large N)

u is the unit the chain waits for (min(chunk, 512 KiB)). Loopback runs and the CPU term are left out.
Exploratory: in-sample, a coarse grid; a form must go into bench/model/collective.h, be fitted by
//bench:calibrate --refit, and be judged on a new held-out plan.
Run from anywhere: python3 bench/tools/ring_credit_check.py"""
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = [r for r in json.load(open(os.path.join(HERE, '..', 'results', 'committed_runs.json')))['runs']
        if r['exchange'] == 'ring' and r.get('link_bytes_per_second') and r['nodes'] > 1]


def step_seconds(r, eff, k, a, form):
    n, s, b, lat = r['nodes'], r['bytes'], r['link_bytes_per_second'], r['latency_s']
    hops, eb = 2 * (n - 1), eff * b
    chunk = s / n
    unit = min(chunk, 512 * 1024)
    cap = min(r['link_burst_bytes'], lat * eb)
    credit = k * cap
    if form != 'flat':
        credit *= min(1.0, (unit / (lat * eb)) ** a) if lat > 0 else 0.0
    if form == 'ratioN':
        credit *= (4.0 / max(n, 4)) ** 0.5
    chain = hops * (lat + max(0.0, unit - credit) / eb)
    return max(chain, hops * chunk / eb + lat)


def best_fit(form):
    best = None
    for eff in [0.94, 0.96, 0.98, 1.0]:
        for k in [x / 20 for x in range(21)]:
            for a in ([1.0] if form == 'flat' else [0.25, 0.5, 0.75, 1.0, 1.5, 2.0]):
                e = [math.log(r['seconds'] / step_seconds(r, eff, k, a, form)) for r in RUNS]
                rms = math.sqrt(sum(x * x for x in e) / len(e))
                if best is None or rms < best[0]:
                    best = (rms, max(abs(x) for x in e), eff, k, a)
    return best


if __name__ == '__main__':
    print('%d shaped ring runs' % len(RUNS))
    for form in ['flat', 'ratio', 'ratioN']:
        rms, worst, eff, k, a = best_fit(form)
        print('%-7s rms %.1f %%  max %.1f %%  efficiency %.2f  k %.2f  a %.2f' % (form, 100 * rms, 100 * worst, eff, k, a))


def paced_step_seconds(r, eff, rho):
    """The sender paces at rho eB (> eB) while the bucket's tokens last: tokens C = min(burst, L eB) drain at
    (rho - 1) eB, so a unit u leaves in u / (rho eB) if it fits before they run out, else at eB after."""
    n, s, b, lat = r['nodes'], r['bytes'], r['link_bytes_per_second'], r['latency_s']
    hops, eb = 2 * (n - 1), eff * b
    chunk = s / n
    unit = min(chunk, 512 * 1024)
    tokens = min(r['link_burst_bytes'], lat * eb)
    pace = rho * eb
    t1 = tokens / (pace - eb)
    send = unit / pace if unit <= pace * t1 else t1 + (unit - pace * t1) / eb
    chain = hops * (lat + send)
    return max(chain, hops * chunk / eb + lat)


def best_paced():
    best = None
    for eff in [0.94, 0.96, 0.98, 1.0]:
        for rho in [1.05, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2.0, 2.5, 3.0, 4.0, 6.0]:
            e = [math.log(r['seconds'] / paced_step_seconds(r, eff, rho)) for r in RUNS]
            rms = math.sqrt(sum(x * x for x in e) / len(e))
            if best is None or rms < best[0]:
                best = (rms, max(abs(x) for x in e), eff, rho)
    return best


if __name__ == '__main__':
    rms, worst, eff, rho = best_paced()
    print('paced   rms %.1f %%  max %.1f %%  efficiency %.2f  pace %.2f x the link (one parameter for the credit)'
          % (100 * rms, 100 * worst, eff, rho))
