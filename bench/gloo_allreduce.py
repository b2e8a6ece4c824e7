#!/usr/bin/python3
"""Reference figure for //bench:allreduce_bench: Gloo's allreduce (torch.distributed, gloo backend) on loopback.

Starts --world_size processes on 127.0.0.1, each allreducing (sum) a float32 tensor of --bytes, --warmup
unmeasured then --iters measured iterations, and prints one line on stdout:
  GLOO_RESULT {"world_size": N, "bytes": S, "time_us": T, "algbw": S/T, "busbw": algbw*2(N-1)/N, "wrong": W}
time_us is the mean per iteration of the slowest rank. Needs Debian's python3-torch (/usr/bin/python3).
"""
import argparse
import json
import os
import socket
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank, args, port, queue):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=args.world_size)
    count = args.bytes // 4
    n = args.world_size
    index = torch.arange(count, dtype=torch.int64)
    # The values psring's bench uses: integers, so the sum is exact and checkable.
    fresh = ((index * 7 + 3) % 1999).to(torch.float32) + 2048.0 * rank
    data = fresh.clone()
    dist.all_reduce(data)
    expected = ((index * 7 + 3) % 1999).to(torch.float32) * n + 2048.0 * (n * (n - 1) // 2)
    wrong = int((data != expected).sum())
    for _ in range(args.warmup):
        dist.all_reduce(data)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.iters):
        dist.all_reduce(data)
    elapsed = (time.perf_counter() - start) / args.iters
    result = torch.tensor([elapsed, float(wrong)], dtype=torch.float64)
    dist.all_reduce(result, op=dist.ReduceOp.MAX)
    if rank == 0:
        queue.put((result[0].item(), int(result[1].item())))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--world_size", type=int, default=2)
    parser.add_argument("--bytes", type=int, default=64 << 20)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300, help="seconds for the whole run")
    args = parser.parse_args()
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, args, port, queue)) for r in range(args.world_size)]
    for p in procs:
        p.start()
    try:
        elapsed, wrong = queue.get(timeout=args.timeout)
    except Exception:  # queue.Empty: a rank failed or hung
        for p in procs:
            p.kill()
        print("gloo_allreduce: no result within %.0f s" % args.timeout, file=sys.stderr)
        return 1
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    algbw = args.bytes / elapsed / 1e9
    n = args.world_size
    print("GLOO_RESULT " + json.dumps({
        "world_size": n, "bytes": args.bytes, "time_us": elapsed * 1e6, "algbw": algbw,
        "busbw": algbw * 2 * (n - 1) / n, "wrong": wrong}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
