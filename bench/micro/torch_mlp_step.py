#!/usr/bin/python3
"""PyTorch eager reference for //bench:trainer_bench: one training step of the same MLP.

Same model (784 -> hidden... -> 10, ReLU, torch.nn.Linear init), softmax cross-entropy (mean), SGD with
momentum 0.9 and weight decay 1e-4, lr 0.03 (the trainer defaults), on random inputs. Prints one line:
  torch_step hidden=256,256 batch=128 device=cpu threads=1 steps=200 step_us=1234.5 samples_per_second=103000
Comparison measurements only (never part of the build or the tests).
"""
import argparse
import time

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hidden", default="256,256", help="comma-separated hidden widths")
    parser.add_argument("--batch", type=int, default=128, help="samples per step")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (CPU)")
    parser.add_argument("--min_seconds", type=float, default=2.0, help="measure at least this long")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    widths = [784] + [int(w) for w in args.hidden.split(",") if w] + [10]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    device = torch.device(args.device)
    model = torch.nn.Sequential(*layers).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(args.batch, 784, device=device)
    y = torch.randint(0, 10, (args.batch,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(10):
        step()
    sync()
    steps = 0
    start = time.perf_counter()
    while True:
        step()
        steps += 1
        if steps % 10 == 0:
            sync()
            if time.perf_counter() - start >= args.min_seconds:
                break
    elapsed = time.perf_counter() - start
    step_us = elapsed / steps * 1e6
    print("torch_step hidden=%s batch=%d device=%s threads=%d steps=%d step_us=%.1f samples_per_second=%.0f"
          % (args.hidden, args.batch, args.device, args.threads, steps, step_us, args.batch * steps / elapsed))


if __name__ == "__main__":
    main()
