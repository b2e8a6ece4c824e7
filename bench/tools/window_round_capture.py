#!/usr/bin/env python3
"""Exploratory (bench/PERFORMANCE.md 9.29): where a PS window round's time beyond the round trip goes.

Runs one //bench:scaling run of ps-1 with one worker (one push stream, so every window round is the same
stream's) on the emulated cluster, captures every emulated host with tcpdump (Debian's; apt-get install
tcpdump) on the host's own side of its link, and follows each connection-level WINDOW_UPDATE the server sends
(an HTTP/2 frame of 13 bytes; two in one segment with the stream's) around the round it starts:

  WU transit     the update's one-way trip server -> worker (the emulated link and the delay program)
  worker react   its arrival at the worker -> the worker's first push segment after it (the worker's wake-up)
  data transit   that segment's one-way trip worker -> server
  burst arrival  that segment's arrival -> the last push segment before the server's next update
  server react   that last segment's arrival -> the server's next update (the server's wake-up and read)
  round          one update -> the next

Both captures run on this box's clock, so one-way times are exact up to tcpdump's timestamps. The transit
beyond the configured latency is the emulator's; the two reactions are the hosts'. Prints the median and
quartiles of each part and the run's step time.

usage (root, after ./bazelw build //bench:scaling):
  python3 bench/tools/window_round_capture.py --link=100mbit --latency=10ms [--bytes=2M] [--steps=8]
  ... --analyze=DIR   (the captures of an earlier run, with its --link and --latency)
From the bench bundle on another host (tools/bench_bundle.sh carries tcpdump when the build host has it, and
this file as tools/window_round_capture.py), with B the unpacked bundle:
  PATH=$B/net/bin:$PATH python3 $B/tools/window_round_capture.py --scaling="$B/bench.sh scaling" \
      --tcpdump=$B/net/bin/tcpdump --link=100mbit --latency=10ms
"""
import argparse
import bisect
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, '..', '..')
PACKET = re.compile(r'^(\d+\.\d+) (\S+)\s+(In|Out)\s+IP (\S+) > (\S+): Flags \[([^\]]*)\],.*length (\d+)')
SEQ = re.compile(r' seq (\d+)')


def packets(pcap, tcpdump):
    """(time, direction, src, dst, seq or None, payload length, flags) of every TCP segment, once."""
    text = subprocess.run([tcpdump, '-r', pcap, '-n', '-tt', '--time-stamp-precision=nano'],
                          capture_output=True, text=True).stdout
    out, seen = [], set()
    for line in text.splitlines():
        m = PACKET.match(line)
        if not m:
            continue
        s = SEQ.search(line)
        seq = int(s.group(1)) if s else None
        row = (float(m.group(1)), m.group(3), m.group(4), m.group(5), seq, int(m.group(7)), m.group(6))
        key = (row[1], row[2], row[3], seq, row[5]) if seq is not None else None
        # -i any can show one segment on two interfaces (the host's veth and its ifb): keep the first.
        if key is not None and key in seen:
            continue
        if key is not None:
            seen.add(key)
        out.append(row)
    return out


def capture_run(args, workdir):
    """Starts tcpdump in each host namespace as the harness creates it; returns {host index: pcap path}."""
    log = open(os.path.join(workdir, 'scaling.txt'), 'w')
    scaling = shlex.split(args.scaling) if args.scaling else [os.path.join(ROOT, 'bazel-bin/bench/scaling')]
    run = subprocess.Popen(scaling + ['--exchanges=ps-1', '--nodes=1',
                            f'--link={args.link}', f'--latency={args.latency}', f'--model_bytes={args.bytes}',
                            f'--steps={args.steps}', '--warmup_steps=2', f'--out_dir={workdir}/out'],
                           stdout=log, stderr=subprocess.STDOUT)
    dumps, pcaps = [], {}
    while run.poll() is None:
        names = subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True).stdout.split()
        for ns in names:
            m = re.match(r'^psr\d+-h(\d+)$', ns)
            if m and int(m.group(1)) not in pcaps:
                pcaps[int(m.group(1))] = os.path.join(workdir, f'h{m.group(1)}.pcap')
                # -Z root: no switch to a 'tcpdump' user, which another host may not have.
                dumps.append(subprocess.Popen(['ip', 'netns', 'exec', ns, args.tcpdump, '-Z', 'root', '-i', 'any',
                                               '-n', '-s', '96',
                                               '--time-stamp-precision=nano', '-w', pcaps[int(m.group(1))]],
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.05)
    for d in dumps:
        d.terminate()
        d.wait()
    log.close()
    if run.returncode != 0:
        sys.exit(f'scaling failed (exit {run.returncode}); see {workdir}/scaling.txt')
    return pcaps


def quartiles(values):
    v = sorted(values)
    return statistics.median(v), v[len(v) // 4], v[3 * len(v) // 4]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--link', required=True, help='tc rate of every host link, e.g. 100mbit')
    parser.add_argument('--latency', required=True, help='one-way latency, e.g. 10ms')
    parser.add_argument('--bytes', default='2M', help='gradient size S (scaling --model_bytes)')
    parser.add_argument('--steps', type=int, default=8, help='measured steps')
    parser.add_argument('--analyze', default='', help='a directory of an earlier capture: analyze it, run nothing')
    parser.add_argument('--scaling', default='',
                        help='the command that runs //bench:scaling (default: bazel-bin/bench/scaling of this tree; '
                             'from a bench bundle: "B/bench.sh scaling")')
    parser.add_argument('--tcpdump', default='tcpdump', help='the tcpdump to capture and read with')
    args = parser.parse_args()
    latency_ms = float(args.latency.rstrip('ms'))
    if args.analyze:
        workdir = args.analyze
        pcaps = {int(f[1:-5]): os.path.join(workdir, f) for f in os.listdir(workdir) if re.match(r'^h\d+\.pcap$', f)}
    else:
        workdir = tempfile.mkdtemp(prefix='window_round_')
        pcaps = capture_run(args, workdir)
    if len(pcaps) < 2:
        sys.exit('no emulated hosts were captured (loopback fallback?); see ' + workdir)
    caps = {h: packets(p, args.tcpdump) for h, p in pcaps.items()}
    # ps-1 with one worker: the push-pull connection is the one that carries data both ways (the harness's
    # link check before the run streams one way); its worker side sends the push.
    flows = {}
    for h, rows in caps.items():
        for t, d, src, dst, seq, length, _ in rows:
            if d == 'Out':
                flows[(h, src, dst)] = flows.get((h, src, dst), 0) + length
    both = {}
    for (h, src, dst), n in flows.items():
        back = [m for (h2, s2, d2), m in flows.items() if h2 != h and s2 == dst and d2 == src]
        if back:
            both[(h, src, dst)] = min(n, back[0])
    (push_host, push_src, push_dst), _ = max(both.items(), key=lambda kv: kv[1])
    # The worker opened the connection (its SYN).
    opened = {(r[2], r[3]) for rows in caps.values() for r in rows if r[6] == 'S'}
    if (push_dst, push_src) in opened:
        push_host = next(h for (h, s2, d2) in both if s2 == push_dst and d2 == push_src)
        push_src, push_dst = push_dst, push_src
    server_host = next(h for (h, s2, d2) in both if s2 == push_dst and d2 == push_src)
    worker, server = caps[push_host], caps[server_host]

    def on(rows, direction, src, dst, small):
        return [r for r in rows if r[1] == direction and r[2] == src and r[3] == dst and
                (0 < r[5] <= 64 if small else r[5] > 1000)]

    # Window updates: the server's short segments to the worker (HTTP/2 WINDOW_UPDATE frames, 13 bytes each).
    updates = on(server, 'Out', push_dst, push_src, True)
    update_in = {r[4]: r[0] for r in on(worker, 'In', push_dst, push_src, True)}
    pushes_out = on(worker, 'Out', push_src, push_dst, False)
    pushes_in = on(server, 'In', push_src, push_dst, False)
    push_in_at = {r[4]: r[0] for r in pushes_in}
    out_t = [r[0] for r in pushes_out]
    in_t = [r[0] for r in pushes_in]
    upd_t = [r[0] for r in updates]
    parts = []
    for u in updates:
        # Its arrival, the worker's next push segment, that segment's arrival, the server's next update; a
        # missing link (a segment one capture lacks, the run's end) drops the round.
        a = update_in.get(u[4])
        j = bisect.bisect_left(out_t, a) if a is not None else len(out_t)
        c = push_in_at.get(pushes_out[j][4]) if j < len(out_t) else None
        k = bisect.bisect_right(upd_t, c) if c is not None else len(upd_t)
        if k >= len(updates):
            continue
        b = pushes_out[j][0]
        d = updates[k][0]
        e = in_t[bisect.bisect_left(in_t, d) - 1]
        if d - u[0] > 4 * latency_ms / 1e3 + 0.05:  # the step's end (the pull, the next step's start)
            continue
        parts.append((a - u[0], b - a, c - b, e - c, d - e, d - u[0]))
    if not parts:
        sys.exit('no window rounds found; see ' + workdir)
    step = [l for l in open(os.path.join(workdir, 'scaling.txt')) if re.match(r'^\s+\d+\s+\d+\s+float', l)]
    print(f'# ps-1, N = 1, {args.link}, one-way {args.latency}, S = {args.bytes}: {len(parts)} window rounds '
          f'(captures in {workdir})')
    if step:
        cols = step[0].split()
        print(f'# step {cols[10]} ms, model {cols[12]} ms{"  EMULATOR-BOUND" if "EMULATOR-BOUND" in step[0] else ""}')
    print('# part            median     p25     p75   (ms; transit: beyond the configured latency)')
    names = ['WU transit', 'worker react', 'data transit', 'burst arrival', 'server react', 'round']
    for i, name in enumerate(names):
        values = [p[i] * 1e3 - (latency_ms if 'transit' in name else 2 * latency_ms if name == 'round' else 0)
                  for p in parts]
        med, p25, p75 = quartiles(values)
        print(f'  {name:<14} {med:8.3f} {p25:7.3f} {p75:7.3f}')


if __name__ == '__main__':
    main()
