#!/usr/bin/env python3
"""Kill-and-restart check of a parameter server (issue 13, finding 3).

Each run starts one //ps:server shard with a checkpoint folder and --workers //ps:worker processes in
gradient-only mode, kills the server with SIGKILL mid-training, restarts it after --outage seconds on the same
port and measures the re-registration time: from the restarted server printing "listening on" (it accepts
connections) to the last of its workers registering again. A run recovers when every worker then exits 0.

  ./bazelw build //ps:server //ps:worker && tools/ps_restart_check.py --runs=20 --step_timeout=10
"""
import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A //ps:server whose stderr lines are timestamped as they arrive."""

    def __init__(self, binary, args):
        self.proc = subprocess.Popen([binary] + args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.lines = []  # (monotonic time, line)
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stderr:
            with self.cond:
                self.lines.append((time.monotonic(), line.rstrip()))
                self.cond.notify_all()

    def wait_for(self, predicate, count, timeout):
        """Times of the first `count` lines matching predicate, or None on timeout."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                hits = [t for t, line in self.lines if predicate(line)]
                if len(hits) >= count:
                    return hits[:count]
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None and not self.thread.is_alive():
                    return None
                self.cond.wait(min(left, 0.05))


def one_run(opts, run):
    port = free_port()
    ckpt = tempfile.mkdtemp(prefix="ps_restart_")
    server_args = [f"--port={port}", "--bind_addr=127.0.0.1", f"--workers={opts.workers}",
                   f"--step_timeout={opts.step_timeout}", f"--checkpoint_dir={ckpt}", "--checkpoint_every=20"]
    server = Server(opts.server, server_args)
    workers = []
    try:
        if server.wait_for(lambda l: "listening on" in l, 1, 30) is None:
            return None, "server did not start"
        for rank in range(opts.workers):
            workers.append(subprocess.Popen(
                [opts.worker, f"--servers=127.0.0.1:{port}", f"--rank={rank}", f"--world_size={opts.workers}",
                 f"--model_bytes={opts.model_bytes}", f"--max_steps={opts.steps}", "--warmup_steps=0",
                 "--timeout=60"], stdout=subprocess.DEVNULL, stderr=open(os.path.join(ckpt, f"worker{rank}.log"), "w")))
        if server.wait_for(lambda l: "registered at version" in l, opts.workers, 30) is None:
            return None, "workers did not register"
        time.sleep(opts.kill_after)
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait()
        time.sleep(opts.outage)
        server = Server(opts.server, server_args)
        listening = server.wait_for(lambda l: "listening on" in l, 1, 30)
        if listening is None:
            return None, "restarted server did not start"
        registered = server.wait_for(lambda l: "registered at version" in l, opts.workers, 30)
        if registered is None:
            return None, "workers did not re-register within 30 s"
        seconds = registered[-1] - listening[0]
        codes = [w.wait(timeout=300) for w in workers]
        if any(codes):
            with open(os.path.join(ckpt, f"worker{codes.index(next(c for c in codes if c))}.log")) as log:
                tail = log.read().strip().splitlines()[-3:]
            return seconds, f"worker exit codes {codes} (logs in {ckpt}): " + " | ".join(tail)
        return seconds, None
    finally:
        with open(os.path.join(ckpt, "server.log"), "w") as log:
            log.write("\n".join(f"{t:.3f} {line}" for t, line in server.lines) + "\n")
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
        if server.proc.poll() is None:
            server.proc.send_signal(signal.SIGTERM)
            try:
                server.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.proc.kill()
                server.proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default="bazel-bin/ps/server")
    parser.add_argument("--worker", default="bazel-bin/ps/worker")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--step_timeout", type=float, default=10)
    parser.add_argument("--model_bytes", type=int, default=4 << 20)
    parser.add_argument("--steps", type=int, default=3000, help="gradient-only steps per worker")
    parser.add_argument("--kill_after", type=float, default=1.0, help="seconds of training before SIGKILL")
    parser.add_argument("--outage", type=float, default=0.2, help="seconds between the kill and the restart")
    opts = parser.parse_args()
    times, failures = [], 0
    for run in range(opts.runs):
        seconds, error = one_run(opts, run)
        if seconds is not None:
            times.append(seconds)
        if error:
            failures += 1
        print(f"run {run + 1}: re-registration {'-' if seconds is None else f'{seconds * 1000:.0f} ms'}"
              f"{'' if error is None else ' FAILED: ' + error}", flush=True)
    print(f"{opts.runs - failures} of {opts.runs} runs recovered", end="")
    if times:
        print(f"; re-registration after the restart: median {statistics.median(times) * 1000:.0f} ms, "
              f"max {max(times) * 1000:.0f} ms, min {min(times) * 1000:.0f} ms", end="")
    print()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
