#!/usr/bin/env python3
"""Exploratory check behind bench/PERFORMANCE.md 9.19: does the PS's window round include the share of the
window its receiver consumes before it returns credit? gRPC's chttp2 transport sends the connection's
WINDOW_UPDATE once its announced window falls below half the target, so a stream sending its window W at the
link's rate eB gets credit back 2L + W / (2 eB) after it began, and the window time is
flow (2L / W + s / eB) with s = 1/2.

A Python re-implementation of the PS's terms (bench/model/collective.cc: link, window, stream contention, CPU;
the window queueing the committed model drops) is grid-fitted on the shaped-link runs of
bench/results/committed_runs.json for s = 0 (the stalled flow alone) and nearby shares, with the window, the
efficiency (around the committed value) and, for ps-1, the contention free; the CPU ceiling is the committed
model's. Prints each exchange's best rms and max error per s, and the effective window each window-bound run
implies under s = 0 (it grows with the round trip: the form the share explains). In-sample and exploratory:
the form went into collective.h and was fitted by //bench:calibrate --refit.
Run from anywhere: python3 bench/tools/ps_window_update_check.py"""
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, '..', 'results')
RUNS = json.load(open(os.path.join(RESULTS, 'committed_runs.json')))['runs']
MODEL = {e['exchange']: e for e in json.load(open(os.path.join(RESULTS, 'committed_model.json')))['exchanges']}


def value(exchange, name):
    p = MODEL[exchange].get(name)
    return p['value'] if isinstance(p, dict) else 0.0


def counts(exchange, n, k, s):
    """hops, link_bytes, flow_bytes, cpu_bytes, processes, streams into one server (collective.cc CountsOf)."""
    if exchange == 'ps-1':
        return 2, n * s, s, n * s, n + 1, n
    if exchange == 'ps-dedicated':
        k = max(k, 1)
        busiest = max(s, n * s / k)
        return 2, busiest, s / k, busiest, n + k, n
    return 2, 2 * (n - 1) / n * s, s / n, 2 * s, 2 * n, n - 1  # ps-colocated


def predict(r, window, share, efficiency, contention):
    n, lat = r['nodes'], r['latency_s']
    hops, link_bytes, flow, cpu_bytes, processes, streams = counts(r['exchange'], n, r['servers'], r['bytes'])
    eb = efficiency * r['link_bytes_per_second']
    window_t = flow * 2 * lat / window + share * flow / eb if lat > 0 else 0.0
    link_t = link_bytes / eb
    extra = contention * max(0, streams - 1) * min(link_t, window_t) if lat > 0 else 0.0
    cpu_share = min(1.0, r['box_cores'] / processes) if r['box_cores'] else 1.0
    ceiling = value(r['exchange'], 'cpu_bytes_per_second')
    cpu_t = cpu_bytes / (ceiling * cpu_share) if ceiling else 0.0
    return hops * lat + max(link_t + extra, (window_t + extra) if lat > 0 else 0.0, cpu_t)


def best(runs, exchange, share):
    eff0 = value(exchange, 'efficiency')
    contentions = [0.0, 0.01, 0.02, 0.03, 0.04] if exchange == 'ps-1' else [value(exchange, 'stream_contention')]
    result = None
    for kib in range(50, 121):
        for factor in [0.96, 0.98, 1.0, 1.02, 1.04]:
            if eff0 * factor > 1:
                continue
            for c in contentions:
                e = [math.log(r['seconds'] / predict(r, kib * 1024, share, eff0 * factor, c)) for r in runs]
                rms = math.sqrt(sum(x * x for x in e) / len(e))
                if result is None or rms < result[0]:
                    result = (rms, max(abs(x) for x in e), kib, eff0 * factor, c)
    return result


if __name__ == '__main__':
    for exchange in ['ps-1', 'ps-colocated', 'ps-dedicated']:
        runs = [r for r in RUNS if r['exchange'] == exchange and r['link_bytes_per_second']]
        for share in [0.0, 0.25, 0.5, 0.75, 1.0]:
            rms, worst, kib, eff, c = best(runs, exchange, share)
            print('%-13s %2d shaped runs  share %.2f  rms %.2f %%  max %.1f %%  window %d KiB  efficiency %.3f  '
                  'contention %.2f' % (exchange, len(runs), share, 100 * rms, 100 * worst, kib, eff, c))
    print('effective window of the window-bound runs under share 0 (flow 2L / (T - 2L)), KiB:')
    for r in sorted(RUNS, key=lambda r: (r['exchange'], r['latency_s'], r['nodes'])):
        if r['exchange'] == 'ring' or not r['link_bytes_per_second'] or r['latency_s'] < 0.004:
            continue
        _, link_bytes, flow, _, _, _ = counts(r['exchange'], r['nodes'], r['servers'], r['bytes'])
        eb = value(r['exchange'], 'efficiency') * r['link_bytes_per_second']
        implied = flow * 2 * r['latency_s'] / max(1e-9, r['seconds'] - 2 * r['latency_s'])
        # window-bound at the committed model's window (its time with the share above the link's)
        window = value(r['exchange'], 'window_bytes')
        if flow * 2 * r['latency_s'] / window + 0.5 * flow / eb > link_bytes / eb:
            print('  %-13s L %2.0f ms N %2d %3.0f Mbit/s: %.1f' % (r['exchange'], 1e3 * r['latency_s'], r['nodes'],
                                                            8e-6 * r['link_bytes_per_second'], implied / 1024))
