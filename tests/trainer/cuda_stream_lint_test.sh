#!/usr/bin/env bash
# Keeps the GPU code's ordering and error checks right by construction (issue 14, defects 1 and 2), where no
# GPU can check them: in the CUDA engine, the kernels and the NCCL transport,
#   - no call that runs on the legacy default stream or blocks the host without a deadline
#     (cudaMemset, cudaMemcpy, cudaDeviceSynchronize): work goes on the engine's / group's own stream;
#   - no triple-chevron launch and no `return cudaGetLastError()`: launches go through LaunchKernel
#     (trainer/cuda_launch.h), whose result is the launch's own error.
set -uo pipefail
status=0
check() {  # check REGEX WHY FILE...
  local regex="$1" why="$2"
  shift 2
  if grep -nE "$regex" "$@"; then
    echo "FAIL: $why"
    status=1
  fi
}
check '\b(cudaMemset|cudaMemcpy|cudaDeviceSynchronize)\(' \
  "use the *Async form on the engine's stream (a legacy-default-stream call is unordered with it)" "$@"
check '<<<' "launch through LaunchKernel (trainer/cuda_launch.h)" "$@"
check 'return +cudaGetLastError\(\)' "a launch check must not report an earlier call's error" "$@"
[[ $status -eq 0 ]] && echo "PASS: $# files"
exit $status
