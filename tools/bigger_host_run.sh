#!/usr/bin/env bash
# tools/bigger_host_run.sh — one timed call on a bigger host (e.g. a lent GPU machine with 16 cores): unpack the
# bench bundle and the GPU runbook's bundle, run one bench suite from the bundle, then the GPU runbook with the
# seconds left. Made for a machine lent for a fixed budget, where one prepared call must do everything.
#
#   ./bazelw build //... && tools/bench_bundle.sh out/dev/psring-bench --without-cuda-libs     # here
#   tools/gpu_check.sh --bundle out/gpu-slim --without-cuda-libs && tar cJf out/gpu-slim.tar.xz -C out gpu-slim
#   # there, from a copy of this tree carrying out/dev/psring-bench.tar.xz and out/gpu-slim.tar.xz, as root:
#   tools/bigger_host_run.sh --budget=580 --out=$OUT -- validate --plan=bench/results/plans/high_latency_2026-11-27.json
#
# Flags (before --; after it: the suite and its flags, given to the bundle's bench.sh unchanged):
#   --budget=S      seconds for the whole call (default 580); the suite gets what is left minus --gpu_min, the
#                   runbook what the suite leaves (skipped below 90 s); validate and calibrate get a
#                   --time_limit inside it (less the captures' time and a tenth), so a plan longer than the
#                   call reports (or fits) what ran
#   --gpu_min=S     seconds kept for the runbook (default 0: the suite may use the whole budget)
#   --gpu_timeout=S the runbook's per-step timeout (PSRING_GPU_CHECK_TIMEOUT; default 240: section 8's PyTorch
#                   comparison needs more than 60 s)
#   --out=DIR       where <suite>.txt, gpu_check.log and, for compare, scaling, calibrate, validate and
#                   crossover_maps, the suite's --out_dir go (default ./bigger-host-out)
#   --bench=TAR     the bench bundle (default out/dev/psring-bench.tar.xz); --gpu=TAR the runbook's
#                   (default out/gpu-slim.tar.xz; missing: no runbook)
#   --capture=LINK:LATENCY[,...]  after the suite, the bundle's tools/window_round_capture.py at each (e.g.
#                   100mbit:10ms,100mbit:40ms: where a PS window round's time goes on this host, about 40 s
#                   each; bench/PERFORMANCE.md 9.29), into <out>/window_round_capture.txt; needs the bundle's
#                   tcpdump and the host's python3
# Prints the suite's output without its header's wrapped lines, then the runbook's summary; exit status: the
# suite's (124 when it ran out of time).
set -uo pipefail

budget=580 gpu_min=0 gpu_timeout=240 out=./bigger-host-out captures=""
bench_tar=out/dev/psring-bench.tar.xz gpu_tar=out/gpu-slim.tar.xz
usage() { sed -n '2,/^set -uo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d' | sed -E 's/^# ?//'; }
while (($#)); do
  case "$1" in
    --budget=*) budget="${1#*=}" ;;
    --gpu_min=*) gpu_min="${1#*=}" ;;
    --gpu_timeout=*) gpu_timeout="${1#*=}" ;;
    --out=*) out="${1#*=}" ;;
    --bench=*) bench_tar="${1#*=}" ;;
    --gpu=*) gpu_tar="${1#*=}" ;;
    --capture=*) captures="${1#*=}" ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "bigger_host_run: unknown flag '$1' (--help lists them; the suite goes after --)" >&2; exit 2 ;;
  esac
  shift
done
if (($# == 0)); then echo "bigger_host_run: no suite after -- (e.g. -- validate --quick)" >&2; exit 2; fi
for n in "$budget" "$gpu_min" "$gpu_timeout"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "bigger_host_run: '$n' is not a number of seconds" >&2; exit 2; }
done
[[ -f "$bench_tar" ]] || { echo "bigger_host_run: no bench bundle at $bench_tar (tools/bench_bundle.sh makes it)" >&2; exit 2; }

suite="$1"
shift
mkdir -p "$out" || exit 2
work="$(mktemp -d)" || exit 2
echo "# $(date -u +%FT%TZ) $(nproc) cores, kernel $(uname -r); budget ${budget}s"
tar xJf "$bench_tar" -C "$work" || { echo "bigger_host_run: cannot unpack $bench_tar" >&2; exit 2; }
bench_sh="$(ls -d "$work"/*/bench.sh | head -1)"
gpu_sh=""
if [[ -f "$gpu_tar" ]]; then
  tar xJf "$gpu_tar" -C "$work" && gpu_sh="$(ls -d "$work"/*/gpu_check.sh 2>/dev/null | head -1)"
fi
echo "# unpacked at ${SECONDS}s"

suite_s=$((budget - gpu_min - SECONDS))
if ((suite_s < 30)); then echo "bigger_host_run: ${suite_s}s left for $suite" >&2; exit 2; fi
suite_flags=()  # the suites that write files get theirs under --out (a later --out_dir among the flags wins)
case "$suite" in compare | scaling | calibrate | validate | crossover_maps) suite_flags=(--out_dir="$out/$suite") ;; esac
# validate and calibrate start no sweep that would end past their --time_limit (by its estimate at the pace so
# far), so a plan longer than the call still reports (validate) or keeps and fits (calibrate) what it measured:
# the suite's seconds less the captures' (about 45 s each) and a tenth (at least 20 s) for a sweep that runs
# over. A --time_limit among the flags wins.
if [[ ("$suite" == validate || "$suite" == calibrate) && " $* " != *" --time_limit="* ]]; then
  n_captures=0
  [[ -n "$captures" ]] && n_captures=$(tr ',' '\n' <<<"$captures" | wc -l)
  margin=$((suite_s / 10 > 20 ? suite_s / 10 : 20))
  limit=$((suite_s - 45 * n_captures - margin))
  ((limit < 30)) && limit=30
  suite_flags+=(--time_limit="${limit}s")
  echo "# $suite --time_limit=${limit}s (of the suite's ${suite_s}s: ${n_captures} capture(s) after it)"
fi
timeout "$suite_s" "$bench_sh" "$suite" "${suite_flags[@]}" "$@" >"$out/$suite.txt" 2>&1
rc=$?
echo "# $suite exit $rc at ${SECONDS}s$( ((rc == 124)) && echo " (out of its ${suite_s}s)")"
grep -v '^#   ' "$out/$suite.txt" | tail -80

bundle_dir="$(dirname "$bench_sh")"
tcpdump="$bundle_dir/net/bin/tcpdump"  # the bundle's, else the host's
[[ -x "$tcpdump" ]] || tcpdump="$(command -v tcpdump || true)"
if [[ -n "$captures" && -z "$tcpdump" ]]; then
  echo "# captures not run: neither the bundle (built where tcpdump was missing) nor this host has tcpdump"
elif [[ -n "$captures" ]]; then
  for c in ${captures//,/ }; do
    left=$((budget - gpu_min - SECONDS))
    if ((left < 60)); then echo "# capture $c not run: ${left}s left"; continue; fi
    PATH="$bundle_dir/net/bin:$PATH" timeout "$left" python3 "$bundle_dir/tools/window_round_capture.py" \
      --scaling="$bench_sh scaling" --tcpdump="$tcpdump" --link="${c%%:*}" \
      --latency="${c#*:}" >>"$out/window_round_capture.txt" 2>&1
    echo "# capture $c exit $? at ${SECONDS}s"
  done
  [[ -f "$out/window_round_capture.txt" ]] && grep -E '^# (ps-1|step)|^  ' "$out/window_round_capture.txt"
fi

left=$((budget - SECONDS))
if [[ -z "$gpu_sh" ]]; then
  echo "# GPU runbook: no bundle at $gpu_tar"
elif ((left < 90)); then
  echo "# GPU runbook not run: ${left}s left"
else
  PSRING_GPU_CHECK_TIMEOUT="$gpu_timeout" timeout "$left" "$gpu_sh" >"$out/gpu_check.log" 2>&1
  echo "# GPU runbook exit $? at ${SECONDS}s"
  sed -n '/==== summary ====/,$p' "$out/gpu_check.log"
fi
rm -rf "$work"
exit "$rc"
