#!/bin/bash
# Exploratory (bench/PERFORMANCE.md 9.17): the pace at which one emulated host sends its ring chunks. Runs one
# //bench:scaling ring run and captures host 1 for 5 s with tcpdump (Debian's; apt-get install tcpdump).
# usage: bench/tools/ring_pace_capture.sh LINK LATENCY N S [CONGESTION_CONTROL]   (root; after ./bazelw build //bench:scaling)
set -u
link=$1; lat=$2; n=$3; s=$4; cc=${5:-}
cd "$(dirname "$0")/../.."
mkdir -p "${TMPDIR:-/tmp}/ring_pace"
extra=""; [ -n "$cc" ] && extra="--tcp_congestion=$cc"
out=${TMPDIR:-/tmp}/ring_pace/pace_${link}_${lat}_${n}_${s}${cc}
bazel-bin/bench/scaling --link=$link --latency=$lat --nodes=$n --exchanges=ring --model_bytes=$s --steps=20 --warmup_steps=1 $extra --out_dir=$out > $out.txt 2>&1 &
pid=$!
for i in $(seq 1 60); do sleep 1; grep -q "warm-up\|\[1/1\]" $out.txt 2>/dev/null && break; done
sleep 12
ns=$(ip netns list | awk '{print $1}' | grep -- "-h1$" | head -1)
timeout 5 ip netns exec $ns tcpdump -i eth0 -nn -tt -s 96 -w $out.pcap tcp >/dev/null 2>&1
wait $pid
tcpdump -nn -tt -r $out.pcap 2>/dev/null | python3 -c "
import sys,re,statistics,json
out=[]
for line in sys.stdin:
    m=re.match(r'(\d+\.\d+) IP (\S+) > (\S+): .* length (\d+)',line)
    if not m: continue
    t,src,ln=float(m.group(1)),m.group(2),int(m.group(4))
    if ln and src.startswith('198.18.0.2.'): out.append((t,ln))
b=[];cur=None
for t,ln in out:
    if cur and t-cur[1]<0.002: cur[1]=t;cur[2]+=ln
    else:
        if cur: b.append(cur)
        cur=[t,t,ln]
if cur: b.append(cur)
rates=[x[2]/(x[1]-x[0]) for x in b if x[1]>x[0] and x[2]>20000]
r=json.load(open('$out/scaling.json'))['runs'][0]
B=float('${link%mbit}')*1e6/8
print('$link $lat N=$n S=$s $cc bursts %d median pace %.1f MB/s = %.2f x link; step %.3f model %.3f'%(len(rates),statistics.median(rates)/1e6 if rates else 0,(statistics.median(rates)/B) if rates else 0,r['step_s'],r['model_s']))
"
