#!/usr/bin/env bash
# tools/gpu_check.sh — the GPU runbook: one command that checks psring's GPU path on a GPU host.
#
#   ./bazelw build //...  &&  tools/gpu_check.sh          # a GPU host that can build: runs from bazel-bin/
#   tools/gpu_check.sh --bundle DIR                        # the build host: DIR = binaries + shared libraries
#   tools/gpu_check.sh --bundle DIR --without-cuda-libs    # the same without cuBLAS and NCCL (about 760 MB less):
#                                                          # the GPU host's own are used (CUDA toolkit or
#                                                          # python3's nvidia-* wheels, e.g. PyTorch's)
#   DIR/gpu_check.sh                                       # a GPU host with only a driver: runs the bundle
#
# Sections (every one runs; the exit status is 1 when any failed). G is the number of GPUs nvidia-smi lists.
#   1. versions: GPU, driver and CUDA (nvidia-smi), and the CUDA runtime, cuBLAS and NCCL libraries the
#      binaries actually load (ldd; a library "not found" fails);
#   2. the CUDA engine against the CPU engine (//tests/trainer:cuda_parity_test);
#   3. the NCCL transport at world size 1 (//tests/ring:nccl_test), with NCCL_DEBUG=VERSION;
#   4. two NCCL ranks on one GPU through sockets (distinct NCCL_HOSTID per rank, P2P/SHM/IB off) — NCCL
#      normally refuses two ranks on one GPU; this says whether the workaround is accepted on this host.
#      On a host with ONE GPU where it is, sections 5-7 and 9 run their N = 2 cases with both ranks on that
#      GPU through the same workaround (their lines say "(2 ranks share 1 GPU)"): real NCCL, real device
#      buffers, a real kill -9, but socket transport, so the table's busbw is not a GPU-to-GPU figure;
#   5. training the MLP over NCCL with device buffers, one GPU per rank (--local_rank=r), for N = 2 .. G:
#      the transport must be ring-nccl, every rank must end with bit-identical parameters, and those must
#      match one rank with batch N*b within 1e-4 of the largest parameter;
#   6. the same with --bucket_mb=1 (bucketed, overlapped with backward);
#   7. kill -9 of rank 1 mid-run (N = 2): rank 0 must exit non-zero within its --timeout + 30 s;
#   8. one training step, CUDA engine vs PyTorch eager on the same GPU (//bench:trainer_bench); FAIL when
#      torch with CUDA is there and the comparison fails, SKIP when python3 has no torch with CUDA;
#   9. an allreduce table (nccl-tests' columns) from device buffers: ring_worker's gradient-only mode with
#      --device=cuda over NCCL, one GPU per rank, N = 1, 2, 4, 8 up to G; busbw = algbw * 2(N-1)/N is what
#      nccl-tests' all_reduce_perf reports for the same size (bench/PERFORMANCE.md).
# Every step runs under `timeout` (PSRING_GPU_CHECK_TIMEOUT seconds, default 300), so nothing can hang the
# runbook; a step that times out FAILs with "timed out". PSRING_REQUIRE_GPU=1 is set for psring's binaries,
# so a GPU test that cannot run fails instead of skipping. The bundle's libraries are given to psring's
# binaries only (never exported), so python3 and torch load their own.
# PSRING_GPU_CHECK_CPU_REHEARSAL=N rehearses sections 5-7 and 9 with N CPU ranks over the TCP ring (the
# runbook's own logic, on a host without GPUs); their lines then say "(CPU rehearsal)".
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BINARIES=(tests/trainer/cuda_parity_test tests/ring/nccl_test ring/ring_worker bench/trainer_bench)
step_timeout="${PSRING_GPU_CHECK_TIMEOUT:-300}"
worker_timeout=30  # ring_worker --timeout: every wait for another rank, NCCL's set-up and each collective

# Copies the binaries, bench/micro/torch_mlp_step.py, this script and every shared library the binaries load,
# except glibc's and the driver's (those must come from the GPU host), into DIR. Fails when a binary is
# missing, a library is "not found", a copy fails, or a bundled binary does not resolve every library from
# the bundle (what the GPU host will see).
# Libraries --without-cuda-libs leaves to the GPU host; their names (as ldd printed them) go to DIR/host_libs,
# which find_host_cuda_libs reads on the GPU host.
HOST_CUDA_LIBS='libcublas\.so|libcublasLt\.so|libnccl\.so'
bundle() {
  local dir="$1" slim="${2:-}" root b lib bad=0 left=""
  root="$(cd "$here/.." && pwd)"
  mkdir -p "$dir/bin" "$dir/lib" || return 1
  for b in "${BINARIES[@]}"; do
    [[ -x "$root/bazel-bin/$b" ]] || { echo "missing $root/bazel-bin/$b: run ./bazelw build //... first"; return 1; }
    mkdir -p "$dir/bin/$(dirname "$b")" || return 1
    cp -f "$root/bazel-bin/$b" "$dir/bin/$b" || { echo "cannot copy $b"; bad=1; }
    if ldd "$root/bazel-bin/$b" | grep -v -E "libcuda\.so|libnvidia-" | grep "not found"; then
      echo "$b: the libraries above are not found on this host; the bundle would be incomplete"
      bad=1
    fi
    while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*|libnvidia-*) ;;
        *)
          if [[ -n "$slim" ]] && grep -q -E "^($HOST_CUDA_LIBS)" <<<"$(basename "$lib")"; then
            left+=" $(basename "$lib")"
          else
            cp -fL "$lib" "$dir/lib/" || { echo "cannot copy $lib"; bad=1; }
          fi
          ;;
      esac
    done < <(ldd "$root/bazel-bin/$b" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
  done
  mkdir -p "$dir/bin/bench/micro" || return 1
  cp -f "$root/bench/micro/torch_mlp_step.py" "$dir/bin/bench/micro/" || bad=1
  cp -f "$here/gpu_check.sh" "$dir/gpu_check.sh" || bad=1
  # What the GPU host's loader will do: everything but glibc and the driver from the bundle.
  local host_only="libcuda\.so|libnvidia-"
  [[ -n "$slim" ]] && host_only+="|$HOST_CUDA_LIBS"
  for b in "${BINARIES[@]}"; do
    if LD_LIBRARY_PATH="$dir/lib" ldd "$dir/bin/$b" | grep -v -E "$host_only" | grep "not found"; then
      echo "bundled $b does not find the libraries above in $dir/lib"
      bad=1
    fi
  done
  if [[ $bad -ne 0 ]]; then echo "bundle in $dir is INCOMPLETE (see above)"; return 1; fi
  echo "bundle in $dir ($(du -sh "$dir" | cut -f1)); libraries carried:"
  ls "$dir/lib" | sed 's/^/  /'
  if [[ -n "$slim" ]]; then
    tr ' ' '\n' <<<"$left" | sed '/^$/d' | sort -u >"$dir/host_libs" || return 1
    echo "left to the GPU host (--without-cuda-libs): $(tr '\n' ' ' <"$dir/host_libs")"
    echo "  gpu_check.sh finds them in LD_LIBRARY_PATH, the loader's cache, /usr/local/cuda*/lib64 or python3's nvidia-* wheels"
  fi
  echo "on the GPU host: $dir/gpu_check.sh"
}

if [[ "${1:-}" == "--bundle" ]]; then
  if [[ $# -eq 2 ]]; then
    bundle "$2"
  elif [[ $# -eq 3 && "$3" == "--without-cuda-libs" ]]; then
    bundle "$2" slim
  else
    echo "usage: $0 --bundle DIR [--without-cuda-libs]"
    exit 2
  fi
  exit $?
fi

# Where the binaries are: a bundle (bin/ next to this script) or the build tree.
psring_libs=""
if [[ -d "$here/bin" ]]; then
  bin="$here/bin"
  psring_libs="$here/lib"
else
  bin="$(cd "$here/.." && pwd)/bazel-bin"
fi
# A bundle made --without-cuda-libs: the libraries its host_libs file names (cuBLAS and NCCL) come from this
# host. Where the loader would not find one, the first folder that holds it (the CUDA toolkit's, or python3's
# nvidia-* wheels, which PyTorch installs) is added to the path psring's binaries get.
find_host_cuda_libs() {
  local want dir found cache
  # Read once, not piped into grep -q: under pipefail, ldconfig killed by SIGPIPE after an early match would
  # make a library in the cache look missing.
  cache=$(ldconfig -p 2>/dev/null)
  for want in $(cat "$here/host_libs"); do
    [[ -e "$psring_libs/$want" ]] && continue
    grep -qF "$want" <<<"$cache" && continue
    found=""
    for dir in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }} /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib \
      $(python3 -c 'import nvidia, sys; print(" ".join(nvidia.__path__))' 2>/dev/null); do
      found=$(find "$dir" -maxdepth 3 -name "$want" 2>/dev/null | head -1)
      [[ -n "$found" ]] && break
    done
    if [[ -n "$found" ]]; then
      echo "$want from this host: $found"
      [[ ":$psring_libs:" == *":$(dirname "$found"):"* ]] || psring_libs+=":$(dirname "$found")"
    else
      echo "$want: not in the bundle and not found on this host (section 1's ldd will say so)"
    fi
  done
}
[[ -f "$here/host_libs" ]] && find_host_cuda_libs
torch_script="$bin/bench/micro/torch_mlp_step.py"
[[ -f "$torch_script" ]] || torch_script="$here/../bench/micro/torch_mlp_step.py"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# run SECONDS COMMAND...: a psring binary under timeout, with the bundle's libraries for it alone.
run() {
  local t="$1"
  shift
  timeout -k 10 "$t" env PSRING_REQUIRE_GPU=1 \
    ${psring_libs:+LD_LIBRARY_PATH="$psring_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"} "$@"
}
# "timed out" for timeout's own exit codes, else "exit N".
why() { if [[ $1 -eq 124 || $1 -eq 137 ]]; then echo "timed out"; else echo "exit $1"; fi; }

declare -a summary=()
failed=0
record() {  # record NAME STATUS [NOTE]
  summary+=("$(printf '%-52s %-5s %s' "$1" "$2" "${3:-}")")
  [[ "$2" == FAIL ]] && failed=1
}
section() { printf '\n==== %s ====\n' "$1"; }
field() { grep -o "\"$2\":[^,}]*" <<<"$1" | head -1 | cut -d: -f2 | tr -d '"'; }

# ---- 1. versions ---------------------------------------------------------------------------------------
section "1. GPU, driver, CUDA, NCCL"
gpus=0
if command -v nvidia-smi >/dev/null; then
  timeout 60 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,pci.bus_id --format=csv
  rc=$?
  timeout 60 nvidia-smi | grep -m1 "CUDA Version" | sed 's/^[ |]*//'
  gpus=$(timeout 60 nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [[ $rc -eq 0 && $gpus -gt 0 ]]; then record "versions" PASS "$gpus GPU(s)"; else record "versions" FAIL "nvidia-smi: $(why $rc), $gpus GPUs"; fi
else
  echo "nvidia-smi not found: no NVIDIA driver on this host"
  record "versions" FAIL "no nvidia-smi (no driver)"
fi
for b in "${BINARIES[@]}"; do
  [[ -x "$bin/$b" ]] || { echo "missing $bin/$b"; record "binary $b" FAIL "not built / not bundled"; }
done
if [[ -x "$bin/tests/ring/nccl_test" ]]; then
  echo "libraries the NCCL test loads:"
  libs=$(run 60 ldd "$bin/tests/ring/nccl_test")
  grep -E "libcudart|libcublas|libnccl|libcuda\.|not found" <<<"$libs" |
    while read -r name _ path _; do echo "  $name -> $(readlink -f "$path" 2>/dev/null || echo "$path")"; done
  if grep -v -E "libcuda\.so|libnvidia-" <<<"$libs" | grep -q "not found"; then
    record "libraries" FAIL "ldd: a library is not found (see above)"
  fi
fi

device=cuda transport=nccl rehearsal=""
if [[ -n "${PSRING_GPU_CHECK_CPU_REHEARSAL:-}" ]]; then
  gpus="$PSRING_GPU_CHECK_CPU_REHEARSAL" device=cpu transport=tcp rehearsal=" (CPU rehearsal)"
fi
ranks_max=$gpus  # the most ranks sections 5-7 and 9 start: one per GPU, or 2 when they share one (section 4)

# ---- 2. CUDA parity ------------------------------------------------------------------------------------
section "2. CUDA engine vs CPU engine (cuda_parity_test)"
run "$step_timeout" "$bin/tests/trainer/cuda_parity_test"
rc=$?
if [[ $rc -eq 0 ]]; then record "cuda_parity_test" PASS; else record "cuda_parity_test" FAIL "$(why $rc)"; fi

# ---- 3. NCCL, world size 1 -----------------------------------------------------------------------------
section "3. NCCL transport, world size 1 (nccl_test)"
NCCL_DEBUG=VERSION run "$step_timeout" "$bin/tests/ring/nccl_test"
rc=$?
if [[ $rc -eq 0 ]]; then record "nccl_test" PASS; else record "nccl_test" FAIL "$(why $rc)"; fi

port=29600
# shared=1 once section 4 found that two NCCL ranks may share this host's only GPU: every rank then runs on
# GPU 0 with section 4's environment (its own NCCL_HOSTID, socket transport).
shared=0
# one_gpu_env R: what lets NCCL rank R share a GPU with other ranks (its own host id, socket transport only).
one_gpu_env() {
  echo "NCCL_HOSTID=psring-rank-$1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo"
}
# share_env R: one_gpu_env R when ranks share the GPU, nothing otherwise.
share_env() {
  [[ $shared -eq 1 ]] || return 0
  one_gpu_env "$1"
}
local_rank_of() { if [[ $shared -eq 1 ]]; then echo 0; else echo "$1"; fi; }
# ranks N LOGDIR ARGS...: N ring_worker ranks (rank r gets --local_rank=r, or 0 with share_env when the GPU is
# shared, unless ARGS say otherwise), each under timeout; their logs in LOGDIR/<rank>. Returns 0 when every
# rank exited 0, else the first failing rank's exit code.
ranks() {
  local n="$1" logs="$2" r p rc=0 one
  shift 2
  mkdir -p "$logs"
  local pids=()
  for ((r = 0; r < n; r++)); do
    # shellcheck disable=SC2046  # share_env's words are separate assignments
    run "$step_timeout" env $(share_env "$r") "$bin/ring/ring_worker" --rank="$r" --world_size="$n" \
      --local_rank="$(local_rank_of "$r")" --master_addr=127.0.0.1 --master_port="$port" --timeout="$worker_timeout" "$@" \
      >"$logs/$r" 2>&1 &
    pids+=($!)
  done
  port=$((port + 1))
  for p in "${pids[@]}"; do
    wait "$p"
    one=$?
    [[ $rc -eq 0 ]] && rc=$one
  done
  for ((r = 0; r < n; r++)); do
    grep PSRING_RESULT "$logs/$r"
    [[ $rc -eq 0 ]] || tail -n 3 "$logs/$r" | sed "s/^/# rank $r: /"
  done
  return $rc
}

# ---- 4. two NCCL ranks on one GPU ----------------------------------------------------------------------
section "4. two NCCL ranks on one GPU (sockets, distinct NCCL_HOSTID)"
two=()
for ((r = 0; r < 2; r++)); do
  # shellcheck disable=SC2046  # one_gpu_env's words are separate assignments
  run "$step_timeout" env $(one_gpu_env "$r") "$bin/ring/ring_worker" --rank="$r" --world_size=2 --local_rank=0 \
    --master_addr=127.0.0.1 --master_port="$port" --ring_transport=nccl --device=cuda --model_bytes=4194304 \
    --timeout="$worker_timeout" >"$work/one_gpu.$r" 2>&1 &
  two+=($!)
done
port=$((port + 1))
rc=0
for p in "${two[@]}"; do wait "$p" || { one=$?; [[ $rc -eq 0 ]] && rc=$one; }; done
out=$(cat "$work/one_gpu.0" "$work/one_gpu.1" | grep PSRING_RESULT)
echo "$out"
if [[ $rc -eq 0 && $(grep -c '"wrong":0' <<<"$out") -eq 2 ]] && grep -q '"exchange":"ring-nccl"' <<<"$out"; then
  record "nccl 2 ranks on one GPU" PASS
  if [[ -z "$rehearsal" && $gpus -eq 1 ]]; then
    shared=1
    echo "# one GPU on this host: sections 5-7 and 9 run their N = 2 cases with both ranks on it, as here"
  fi
else
  tail -n 3 "$work/one_gpu.0" "$work/one_gpu.1" | sed 's/^/# /'
  record "nccl 2 ranks on one GPU" FAIL "$(why $rc); multi-rank NCCL on one GPU not accepted here"
fi

if [[ $shared -eq 1 ]]; then ranks_max=2 rehearsal=" (2 ranks share 1 GPU)"; fi

# ---- 5./6. training over NCCL with device buffers, one GPU per rank -------------------------------------
# max |a - b| over two raw float32 files, and max |b|: "worst scale".
compare_params() {
  paste <(od -An -v -t f4 -w4 "$1") <(od -An -v -t f4 -w4 "$2") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > w) w = d; s = $2 < 0 ? -$2 : $2; if (s > m) m = s }
         END { printf "%g %g\n", w, m }'
}
train_flags=(--device="$device" --ring_transport="$transport" --dataset=synthetic --synthetic_samples=4096 --hidden=64,32
             --max_steps=20 --seed=7 --log_every=0)
batch=16
# train_check NAME N EXTRA...: N ranks with batch b against one rank with batch N*b.
train_check() {
  local name="$1$rehearsal" n="$2" dir="$work/${1//[^a-z0-9]/_}.$2" rc r worst scale
  shift 2
  ranks 1 "$dir/single" "${train_flags[@]}" --batch_size=$((n * batch)) --params_out="$dir/single{rank}.bin" "$@" >/dev/null
  rc=$?
  [[ $rc -eq 0 ]] || { tail -n 3 "$dir/single/0" | sed 's/^/# one rank: /'; record "$name N=$n" FAIL "one-rank run: $(why $rc)"; return; }
  out=$(ranks "$n" "$dir/ranks" "${train_flags[@]}" --batch_size=$batch --params_out="$dir/rank{rank}.bin" "$@")
  rc=$?
  echo "$out"
  [[ $rc -eq 0 ]] || { record "$name N=$n" FAIL "$(why $rc)"; return; }
  if [[ $(grep -c "\"exchange\":\"ring-$transport\"" <<<"$out") -ne $n ]]; then
    grep -h "ring transport" "$dir"/ranks/* | sed 's/^/# /'
    record "$name N=$n" FAIL "transport is not ring-$transport on every rank"
    return
  fi
  for ((r = 1; r < n; r++)); do
    cmp -s "$dir/rank0.bin" "$dir/rank$r.bin" || { record "$name N=$n" FAIL "rank $r's parameters differ from rank 0's"; return; }
  done
  read -r worst scale < <(compare_params "$dir/rank0.bin" "$dir/single0.bin")
  echo "# N = $n: ranks identical; max |rank 0 - one rank (batch $((n * batch)))| = $worst, largest parameter $scale"
  # The CPU equivalence test holds 1e-5; cuBLAS may pick other kernels for batch b and N*b: ten times more.
  if awk -v w="$worst" -v s="$scale" 'BEGIN { exit !(w <= 1e-4 * s) }'; then
    record "$name N=$n" PASS "max diff $worst"
  else
    record "$name N=$n" FAIL "max diff $worst > 1e-4 * $scale"
  fi
}
section "5. training over NCCL, device buffers, one GPU per rank (N = 2 .. $ranks_max)$rehearsal"
if [[ $ranks_max -lt 2 ]]; then
  record "nccl training (flat)$rehearsal" FAIL "needs 2 GPUs, this host has $gpus"
else
  for ((n = 2; n <= ranks_max; n++)); do train_check "nccl training (flat)" "$n"; done
fi
section "6. the same with --bucket_mb=1 (buckets overlapped with backward)$rehearsal"
if [[ $ranks_max -lt 2 ]]; then
  record "nccl training (--bucket_mb=1)$rehearsal" FAIL "needs 2 GPUs, this host has $gpus"
else
  for ((n = 2; n <= ranks_max; n++)); do train_check "nccl training (--bucket_mb=1)" "$n" --bucket_mb=1 --first_bucket_mb=1; done
fi

# ---- 7. a rank dies ------------------------------------------------------------------------------------
section "7. kill -9 of rank 1 mid-run: rank 0 must exit non-zero within --timeout + 30 s$rehearsal"
if [[ $ranks_max -lt 2 ]]; then
  record "kill -9 of rank 1$rehearsal" FAIL "needs 2 GPUs, this host has $gpus"
else
  kill_dir="$work/kill"
  mkdir -p "$kill_dir"
  pids=()
  # Each rank's shell writes its pid and becomes the ring_worker (exec), so kill -9 hits the worker itself.
  for r in 0 1; do
    # shellcheck disable=SC2046  # share_env's words are separate assignments
    run $((worker_timeout + 60)) sh -c 'echo $$ >"$0"; exec "$@"' "$kill_dir/pid.$r" env $(share_env "$r") \
      "$bin/ring/ring_worker" --rank="$r" --world_size=2 --local_rank="$(local_rank_of "$r")" \
      --master_addr=127.0.0.1 --master_port="$port" --timeout="$worker_timeout" "${train_flags[@]}" \
      --max_steps=-1 --epochs=1000 --batch_size=$batch --log_every=1 >"$kill_dir/$r" 2>&1 &
    pids+=($!)
  done
  port=$((port + 1))
  # Mid-run: once rank 0 has logged training steps (at most a minute for set-up).
  for ((i = 0; i < 120; i++)); do grep -q "^step \[" "$kill_dir/0" 2>/dev/null && break; sleep 0.5; done
  sleep 2
  victim=$(cat "$kill_dir/pid.1" 2>/dev/null)
  [[ -n "$victim" ]] && kill -9 "$victim" 2>/dev/null
  start=$(date +%s)
  wait "${pids[0]}"
  rc=$?
  took=$(($(date +%s) - start))
  wait "${pids[1]}" 2>/dev/null
  tail -n 2 "$kill_dir/0" | sed 's/^/# rank 0: /'
  if [[ $rc -ne 0 && $rc -ne 124 && $rc -ne 137 && $took -le $((worker_timeout + 30)) ]]; then
    record "kill -9 of rank 1$rehearsal" PASS "rank 0 exited $rc after ${took} s"
  else
    record "kill -9 of rank 1$rehearsal" FAIL "rank 0: $(why $rc) after ${took} s (bound $((worker_timeout + 30)) s)"
  fi
fi

# ---- 8. trainer step vs PyTorch ------------------------------------------------------------------------
section "8. training step, CUDA engine vs PyTorch eager (trainer_bench)"
torch_flags=(--torch_compare=false)
torch_note="no torch with CUDA in python3: CUDA rows without the PyTorch comparison"
python="$(command -v python3 || true)"
# python3 and torch run without the bundle's libraries: trainer_bench starts it through this wrapper.
printf '#!/bin/sh\n%s\nexec %q "$@"\n' \
  "$([[ -n "${LD_LIBRARY_PATH:-}" ]] && printf 'LD_LIBRARY_PATH=%q; export LD_LIBRARY_PATH' "$LD_LIBRARY_PATH" || echo 'unset LD_LIBRARY_PATH')" \
  "${python:-python3}" >"$work/python3"
chmod +x "$work/python3"
torch=0
if [[ -n "$python" ]] && timeout 120 "$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  torch=1
  torch_flags=(--torch_compare=true --python="$work/python3" --torch_script="$torch_script")
  echo "PyTorch $(timeout 60 "$python" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
else
  echo "$torch_note"
fi
out=$(run "$step_timeout" "$bin/bench/trainer_bench" --benchmark_filter=cuda "${torch_flags[@]}" 2>&1)
rc=$?
echo "$out"
if [[ $rc -eq 0 ]] && ! grep -q "^# skipped cuda" <<<"$out"; then
  record "trainer_bench cuda" PASS
else
  record "trainer_bench cuda" FAIL "$([[ $rc -ne 0 ]] && why $rc || echo "CUDA cases skipped")"
fi
if [[ $torch -eq 0 ]]; then
  record "PyTorch comparison" SKIP "python3 has no torch with CUDA"
elif [[ $rc -eq 0 ]] && ! grep -qi "torch.*\(fail\|error\|skipped\)" <<<"$out"; then
  record "PyTorch comparison" PASS
else
  record "PyTorch comparison" FAIL "torch is there but the comparison did not run clean"
fi

# ---- 9. allreduce table from device buffers --------------------------------------------------------------
section "9. NCCL allreduce from device buffers (ring_worker --model_bytes --device=cuda, one GPU per rank)$rehearsal"
printf '%12s %4s %12s %10s %10s %7s\n' "size(B)" "N" "time(us)" "algbw" "busbw" "#wrong"
ok=1
rows=0
for n in 1 2 4 8; do
  [[ $n -le $ranks_max ]] || continue
  for bytes in 1048576 16777216 268435456; do
    out=$(ranks "$n" "$work/table.$n.$bytes" --ring_transport="$transport" --device="$device" --model_bytes="$bytes" --max_steps=20)
    rc=$?
    line=$(grep -m1 PSRING_RESULT <<<"$out")
    if [[ $rc -ne 0 || -z "$line" ]]; then echo "# N = $n, $bytes B: $(why $rc), no result"; ok=0; continue; fi
    if ! grep -q "\"exchange\":\"ring-$transport\"" <<<"$line"; then echo "# N = $n: not ring-$transport"; ok=0; continue; fi
    steps=$(field "$line" steps); total=$(field "$line" exchange_s); wrong=$(field "$line" wrong)
    awk -v s="$bytes" -v n="$n" -v steps="$steps" -v t="$total" -v w="${wrong:-0}" 'BEGIN {
      per = t / steps; alg = s / per / 1e9; bus = alg * 2 * (n - 1) / n;
      printf "%12d %4d %12.1f %10.3f %10.3f %7d\n", s, n, per * 1e6, alg, bus, w }'
    rows=$((rows + 1))
    [[ "${wrong:-0}" == 0 ]] || ok=0
  done
done
echo "# algbw = size / time, busbw = algbw * 2(N-1)/N in GB/s (nccl-tests); N = 1 has no bus traffic;"
echo "# buffers in device memory (no host staging), time per allreduce over 20 steps"
if [[ $ok -eq 1 && $rows -gt 0 ]]; then
  record "allreduce table (device buffers)$rehearsal" PASS
else
  record "allreduce table (device buffers)$rehearsal" FAIL "$([[ $rows -eq 0 ]] && echo "no GPU, no rows" || echo "a row failed")"
fi

section "summary"
printf '%s\n' "${summary[@]}"
exit $failed
