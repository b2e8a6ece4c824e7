"""Reference: PyTorch Gloo's ring allreduce of S bytes, for comparison with psring's ring on the same links.

Measurement only (Debian's python3-torch); never used by the build or the tests. Run one per host with
//bench:cluster_run (see bench/PERFORMANCE.md). Rank 0 prints time per allreduce, algbw and busbw
(nccl-tests definitions) in MB/s.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world_size", type=int, required=True)
    p.add_argument("--master_addr", required=True)
    p.add_argument("--master_port", type=int, default=29600)
    p.add_argument("--bytes", type=int, default=16 << 20)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--ifname", default="eth0", help="interface Gloo binds (each emulated host has eth0)")
    a = p.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", a.ifname)
    dist.init_process_group("gloo", init_method=f"tcp://{a.master_addr}:{a.master_port}", rank=a.rank,
                            world_size=a.world_size)
    x = torch.ones(a.bytes // 4, dtype=torch.float32)
    for _ in range(a.warmup):
        dist.all_reduce(x)
    dist.barrier()
    start = time.time()
    for _ in range(a.steps):
        dist.all_reduce(x)
    seconds = (time.time() - start) / a.steps
    if a.rank == 0:
        n = a.world_size
        algbw = a.bytes / seconds
        print(f"gloo allreduce N={n} S={a.bytes} time_s={seconds:.4f} algbw_MBps={algbw / 1e6:.3f} "
              f"busbw_MBps={algbw * 2 * (n - 1) / n / 1e6:.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
