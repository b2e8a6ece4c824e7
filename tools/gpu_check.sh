#!/usr/bin/env bash
# tools/gpu_check.sh — the GPU runbook: one command that checks psring's GPU path on a GPU host.
#
#   ./bazelw build //...  &&  tools/gpu_check.sh          # a GPU host that can build: runs from bazel-bin/
#   tools/gpu_check.sh --bundle DIR                        # the build host: DIR = binaries + shared libraries
#   DIR/gpu_check.sh                                       # a GPU host with only a driver: runs the bundle
#
# Sections (every one runs; the exit status is 1 when any failed):
#   1. versions: GPU, driver and CUDA (nvidia-smi), and the CUDA runtime, cuBLAS and NCCL libraries the
#      binaries actually load (ldd);
#   2. the CUDA engine against the CPU engine (//tests/trainer:cuda_parity_test);
#   3. the NCCL transport at world size 1 (//tests/ring:nccl_test), with NCCL_DEBUG=VERSION;
#   4. two NCCL ranks on one GPU through sockets (distinct NCCL_HOSTID per rank, P2P/SHM/IB off) — NCCL
#      normally refuses two ranks on one GPU; this says whether the workaround is accepted on this host;
#   5. one training step, CUDA engine vs PyTorch eager on the same GPU (//bench:trainer_bench), when
#      python3 has torch with CUDA;
#   6. an allreduce table (nccl-tests style) from ring_worker's gradient-only mode over NCCL, host buffers
#      staged through the GPU: world size 1 (algbw) and 2 (busbw) when section 4 passed.
# PSRING_REQUIRE_GPU=1 is set throughout, so a GPU test that cannot run fails instead of skipping.
set -uo pipefail

export PSRING_REQUIRE_GPU=1

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BINARIES=(tests/trainer/cuda_parity_test tests/ring/nccl_test ring/ring_worker bench/trainer_bench)

# Copies the binaries, bench/torch_mlp_step.py, this script and every shared library the binaries load,
# except glibc's and the driver's (those must come from the GPU host), into DIR.
bundle() {
  local dir="$1" root
  root="$(cd "$here/.." && pwd)"
  mkdir -p "$dir/bin" "$dir/lib" || return 1
  for b in "${BINARIES[@]}"; do
    [[ -x "$root/bazel-bin/$b" ]] || { echo "missing $root/bazel-bin/$b: run ./bazelw build //... first"; return 1; }
    mkdir -p "$dir/bin/$(dirname "$b")"
    cp -f "$root/bazel-bin/$b" "$dir/bin/$b" || return 1
    ldd "$root/bazel-bin/$b" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*|libnvidia-*) ;;
        *) cp -fL "$lib" "$dir/lib/" ;;
      esac
    done
  done
  mkdir -p "$dir/bin/bench"
  cp -f "$root/bench/torch_mlp_step.py" "$dir/bin/bench/" || return 1
  cp -f "$here/gpu_check.sh" "$dir/gpu_check.sh" || return 1
  echo "bundle in $dir ($(du -sh "$dir" | cut -f1)); libraries carried:"
  ls "$dir/lib" | sed 's/^/  /'
  echo "on the GPU host: $dir/gpu_check.sh"
}

if [[ "${1:-}" == "--bundle" ]]; then
  [[ $# -eq 2 ]] || { echo "usage: $0 --bundle DIR"; exit 2; }
  bundle "$2"
  exit $?
fi

# Where the binaries are: a bundle (bin/ next to this script) or the build tree.
if [[ -d "$here/bin" ]]; then
  bin="$here/bin"
  export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  bin="$(cd "$here/.." && pwd)/bazel-bin"
fi
torch_script="$bin/bench/torch_mlp_step.py"
[[ -f "$torch_script" ]] || torch_script="$here/../bench/torch_mlp_step.py"

declare -a summary=()
failed=0
record() {  # record NAME STATUS [NOTE]
  summary+=("$(printf '%-34s %-5s %s' "$1" "$2" "${3:-}")")
  [[ "$2" == FAIL ]] && failed=1
}
section() { printf '\n==== %s ====\n' "$1"; }

# ---- 1. versions ---------------------------------------------------------------------------------------
section "1. GPU, driver, CUDA, NCCL"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,pci.bus_id --format=csv
  nvidia-smi | grep -m1 "CUDA Version" | sed 's/^[ |]*//'
  record "versions" PASS
else
  echo "nvidia-smi not found: no NVIDIA driver on this host"
  record "versions" FAIL "no nvidia-smi (no driver)"
fi
for b in "${BINARIES[@]}"; do
  [[ -x "$bin/$b" ]] || { echo "missing $bin/$b"; record "binary $b" FAIL "not built / not bundled"; continue; }
done
if [[ -x "$bin/tests/ring/nccl_test" ]]; then
  echo "libraries the NCCL test loads:"
  ldd "$bin/tests/ring/nccl_test" | grep -E "libcudart|libcublas|libnccl|libcuda\.|not found" |
    while read -r name _ path _; do echo "  $name -> $(readlink -f "$path" 2>/dev/null || echo "$path")"; done
fi

# ---- 2. CUDA parity ------------------------------------------------------------------------------------
section "2. CUDA engine vs CPU engine (cuda_parity_test)"
if "$bin/tests/trainer/cuda_parity_test"; then record "cuda_parity_test" PASS; else record "cuda_parity_test" FAIL; fi

# ---- 3. NCCL, world size 1 -----------------------------------------------------------------------------
section "3. NCCL transport, world size 1 (nccl_test)"
if NCCL_DEBUG=VERSION "$bin/tests/ring/nccl_test"; then record "nccl_test" PASS; else record "nccl_test" FAIL; fi

# Runs ring_worker with world size N in gradient-only mode over NCCL; prints each rank's PSRING_RESULT line.
# Ranks on one GPU need NCCL's duplicate-GPU check out of the way: a host id of their own, and the network
# (socket) transport instead of peer-to-peer and shared memory.
ring_nccl() {  # ring_nccl N BYTES PORT
  local n="$1" bytes="$2" port="$3" r pids=() rc=0 logs
  logs="$(mktemp -d)"
  for ((r = 0; r < n; r++)); do
    NCCL_HOSTID="psring-rank-$r" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_NET=Socket \
      NCCL_SOCKET_IFNAME=lo "$bin/ring/ring_worker" --rank="$r" --world_size="$n" --local_rank=0 \
      --master_addr=127.0.0.1 --master_port="$port" --ring_transport=nccl --device=cuda \
      --model_bytes="$bytes" --timeout=60 >"$logs/$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  for ((r = 0; r < n; r++)); do
    grep PSRING_RESULT "$logs/$r"
    [[ $rc -eq 0 ]] || tail -n 3 "$logs/$r" | sed "s/^/# rank $r: /" >&2
  done
  rm -rf "$logs"
  return $rc
}
field() { grep -o "\"$2\":[^,}]*" <<<"$1" | head -1 | cut -d: -f2 | tr -d '"'; }

# ---- 4. two NCCL ranks on one GPU ----------------------------------------------------------------------
section "4. two NCCL ranks on one GPU (sockets, distinct NCCL_HOSTID)"
two_ranks=0
out=$(ring_nccl 2 4194304 29611)
echo "$out"
if [[ $(grep -c '"wrong":0' <<<"$out") -eq 2 ]] && grep -q '"exchange":"[^"]*nccl' <<<"$out"; then
  two_ranks=1
  record "nccl 2 ranks on one GPU" PASS
else
  record "nccl 2 ranks on one GPU" FAIL "see the '# rank' lines; multi-rank NCCL not exercised on this host"
fi

# ---- 5. trainer step vs PyTorch ------------------------------------------------------------------------
section "5. training step, CUDA engine vs PyTorch eager (trainer_bench)"
torch_flags=(--torch_compare=false)
if command -v python3 >/dev/null && python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  torch_flags=(--torch_compare=true --python="$(command -v python3)" --torch_script="$torch_script")
  echo "PyTorch $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
else
  echo "python3 has no torch with CUDA: CUDA rows without the PyTorch comparison"
fi
out=$("$bin/bench/trainer_bench" --benchmark_filter=cuda "${torch_flags[@]}" 2>&1)
rc=$?
echo "$out"
if [[ $rc -eq 0 ]] && ! grep -q "^# skipped cuda" <<<"$out"; then
  record "trainer_bench cuda" PASS
else
  record "trainer_bench cuda" FAIL "rc $rc or CUDA cases skipped"
fi

# ---- 6. allreduce table ----------------------------------------------------------------------------------
section "6. NCCL allreduce (ring_worker --model_bytes, host buffers staged through the GPU)"
printf '%12s %4s %12s %10s %10s %7s\n' "size(B)" "N" "time(us)" "algbw" "busbw" "#wrong"
port=29620
ok=1
for n in 1 2; do
  [[ $n -eq 2 && $two_ranks -eq 0 ]] && { echo "# N = 2 left out (section 4 failed)"; continue; }
  for bytes in 1048576 16777216 268435456; do
    line=$(ring_nccl "$n" "$bytes" "$port" | head -1)
    port=$((port + 1))
    if [[ -z "$line" ]]; then echo "# N = $n, $bytes B: no result"; ok=0; continue; fi
    steps=$(field "$line" steps); total=$(field "$line" exchange_s); wrong=$(field "$line" wrong)
    awk -v s="$bytes" -v n="$n" -v steps="$steps" -v t="$total" -v w="$wrong" 'BEGIN {
      per = t / steps; alg = s / per / 1e9; bus = alg * 2 * (n - 1) / n;
      printf "%12d %4d %12.1f %10.3f %10.3f %7d\n", s, n, per * 1e6, alg, bus, w }'
    [[ "$wrong" == 0 ]] || ok=0
  done
done
echo "# algbw = size / time, busbw = algbw * 2(N-1)/N in GB/s (nccl-tests); N = 1 has no bus traffic"
if [[ $ok -eq 1 ]]; then record "allreduce table" PASS; else record "allreduce table" FAIL; fi

section "summary"
printf '%s\n' "${summary[@]}"
exit $failed
