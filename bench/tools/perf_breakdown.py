#!/usr/bin/env python3
"""Where the CPU time of a benchmark run goes, per byte moved: a perf profile split into data-path categories.

Reads `perf script -F comm,tid,period,ip,sym` output (a profile recorded with call graphs, `-g`) on stdin and
prints, for each category, its share of the samples and its CPU nanoseconds per payload byte (sample periods
summed, divided by --bytes: e.g. S times the measured steps). Each sample goes to the first category whose
rule matches its stack, leaf first, so a page fault taken inside memset counts as a page fault.

  perf record -F 499 -e cpu-clock -g -o ps.data bazel-bin/bench/ps_bench --min_bytes=64M --max_bytes=64M \\
      --ranks=1 --shards=1 --iters=40 --socket_bytes=0
  perf script -i ps.data -F comm,tid,period,ip,sym | bench/tools/perf_breakdown.py --bytes=$((40 * 64 << 20)) \
      --exclude=ExpectedServerParameters,Register,SyncInitialParameters,GradientOnlyInitialValue,_dl_
"""
import argparse
import collections
import sys

# (category, substrings any frame of the stack may contain), checked in order; a category whose name starts
# with "=" matches the leaf frame only (arithmetic inlined into a caller that also makes system calls).
RULES = [
    ("page faults (first touch of fresh memory)", ("exc_page_fault",)),
    ("kernel copies user<->socket", ("_copy_to_iter", "_copy_from_iter", "copy_user", "rep_movs_alternative")),
    ("TCP/IP stack, syscalls, wakeups", ("entry_SYSCALL", "do_syscall_64", "tcp_", "__sys_", "futex",
                                         "schedule", "net_rx_action", "do_softirq")),
    ("user copies (memcpy/memmove)", ("__memmove", "__memcpy")),
    ("zeroing (memset)", ("__memset",)),
    ("=reduction / optimizer arithmetic", ("SgdMomentumStep", "ApplyMeanStep", "AddInto", "ScaleBy",
                                           "ReduceInto", "RingCollectives::Receive")),
    ("gradient validation (finite check)", ("FirstNonFinite",)),
    ("bench data generation and check", ("GradientOnly", "CountWrong", "_M_fill_assign", "FillRank",
                                         "CheckRank")),
    ("gRPC / HTTP/2 framing and protobuf", ("grpc", "chttp2", "protobuf", "Serialize", "Deserialize")),
    ("locks, threads", ("Mutex", "CondVar", "pthread", "SpinLock")),
]
OTHER = "other"


def Categorize(stack):
    for name, keys in RULES:
        frames = stack[:1] if name.startswith("=") else stack
        for frame in frames:
            if any(k in frame for k in keys):
                return name.lstrip("=")
    return OTHER


def ParseSamples(lines):
    """Yields (comm, period, [symbols leaf first]) per sample."""
    header, stack = None, []
    for line in lines:
        if not line.strip():
            if header is not None:
                yield header[0], header[1], stack
            header, stack = None, []
            continue
        if not line[0].isspace():
            parts = line.split()
            # "comm tid period" (comm may contain spaces: the last two fields are numbers)
            header = (" ".join(parts[:-2]), int(parts[-1]))
        else:
            fields = line.split(None, 1)
            stack.append(fields[1].strip() if len(fields) > 1 else "")
    if header is not None:
        yield header[0], header[1], stack


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bytes", type=float, required=True, help="payload bytes the profiled run moved")
    parser.add_argument("--exclude", default="",
                        help="comma-separated substrings: samples with a frame containing one are dropped "
                             "(set-up and final checks outside the measured steps)")
    args = parser.parse_args()
    exclude = [e for e in args.exclude.split(",") if e]
    totals = collections.Counter()
    for _, period, stack in ParseSamples(sys.stdin):
        if any(e in frame for frame in stack for e in exclude):
            continue
        totals[Categorize(stack)] += period
    all_ns = sum(totals.values())
    if all_ns == 0:
        sys.exit("perf_breakdown: no samples on stdin (record with -g, then perf script -F comm,tid,period,ip,sym)")
    print(f"# {all_ns / 1e9:.3f} CPU s sampled for {args.bytes / 1e6:.1f} MB: "
          f"{all_ns / args.bytes:.3f} ns/B in all")
    print(f"{'category':48s} {'share':>7s} {'ns/B':>7s}")
    for name, ns in totals.most_common():
        print(f"{name:48s} {100 * ns / all_ns:6.1f}% {ns / args.bytes:7.3f}")


if __name__ == "__main__":
    main()
