#!/usr/bin/env python3
"""Writes a workload profile (proto/workload.proto as JSON) from a PyTorch model's architecture.

Layers are the modules that own parameters, in the order the forward pass calls them (a hook on every
module); each gets its exact parameter count and its forward FLOPs per sample. Compute time per layer is
either a stated step time split by FLOP share (backward = 2 x forward, the usual count for conv/linear
layers), or measured on this machine's device with forward/backward hooks (--measure). No weights are
downloaded: torchvision builds the architectures with random initial values.

  python3 bench/tools/make_profile.py --preset resnet50 --step_ms 200 --batch 64 > bench/workloads/resnet50.json
  python3 bench/tools/make_profile.py --model mypkg.models:build --input 3,224,224 --measure --device cuda

Needs Debian's python3-torch and python3-torchvision (apt-get install python3-torch python3-torchvision);
the presets in bench/workloads/ were written with it, so the build and tests never need PyTorch.
"""
import argparse
import importlib
import json
import sys
import time

import torch
import torch.nn as nn


class BertBaseEncoder(nn.Module):
    """A BERT-base-sized encoder: BERT's embeddings, 12 post-norm layers (hidden 768, 12 heads, FFN 3072) and
    its pooler; the same parameter count as BERT-base (109,482,240)."""

    def __init__(self, vocab=30522, positions=512, hidden=768, heads=12, ffn=3072, layers=12):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(positions, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.embedding_norm = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(hidden, heads, ffn, activation="gelu", batch_first=True)
            for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1]).unsqueeze(0)
        x = self.word(tokens) + self.position(positions) + self.token_type(torch.zeros_like(tokens))
        x = self.embedding_norm(x)
        for layer in self.layers:
            x = layer(x)
        return torch.tanh(self.pooler(x[:, 0]))


class Mlp(nn.Module):
    """psring's default model (trainer/mlp.h): 784 -> 256 -> 256 -> 10 with ReLU."""

    def __init__(self, hidden=(256, 256)):
        super().__init__()
        sizes = [784, *hidden, 10]
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))

    def forward(self, x):
        x = x.flatten(1)
        for i, linear in enumerate(self.linears):
            x = linear(x)
            if i + 1 < len(self.linears):
                x = torch.relu(x)
        return x


def preset(name):
    """(model, example input for one sample, default batch, default step ms, the step time's source)."""
    import torchvision.models as tv
    if name == "resnet50":
        return tv.resnet50(), torch.randn(1, 3, 224, 224), 64, 200.0
    if name == "vgg16":
        return tv.vgg16(), torch.randn(1, 3, 224, 224), 64, 420.0
    if name == "bert_base":
        return BertBaseEncoder(), torch.randint(0, 30522, (1, 128)), 32, 300.0
    if name == "mlp":
        return Mlp(), torch.randn(1, 1, 28, 28), 128, 2.0
    raise SystemExit(f"unknown preset {name!r}: use resnet50, vgg16, bert_base or mlp")


def layer_modules(model):
    """Modules that own parameters; a MultiheadAttention counts as one layer with its out_proj (its forward
    uses out_proj's weights without calling the submodule)."""
    merged = set()
    for m in model.modules():
        if isinstance(m, nn.MultiheadAttention):
            merged.update(id(c) for c in m.modules() if c is not m)
    result = []
    for name, m in model.named_modules():
        if id(m) in merged:
            continue
        recurse = isinstance(m, nn.MultiheadAttention)
        params = sum(p.numel() for p in m.parameters(recurse=recurse) if p.requires_grad)
        if params:
            result.append((name, m, params))
    return result


def forward_flops(module, inputs, output):
    """Forward FLOPs (multiply-add = 2) of one call for the whole input it was given."""
    out = output[0] if isinstance(output, tuple) else output
    if isinstance(module, nn.Conv2d):
        kh, kw = module.kernel_size
        return 2 * out.numel() * (module.in_channels // module.groups) * kh * kw
    if isinstance(module, nn.Linear):
        return 2 * out.numel() * module.in_features
    if isinstance(module, nn.MultiheadAttention):
        x = inputs[0]
        tokens = x.shape[0] * x.shape[1]
        e = module.embed_dim
        seq = x.shape[1] if module.batch_first else x.shape[0]
        return 2 * tokens * e * 3 * e + 2 * tokens * e * e + 4 * tokens * seq * e
    if isinstance(module, nn.Embedding):
        return out.numel()
    return 4 * out.numel()  # norms: a few operations per element


def profile(model, example, batch):
    layers = layer_modules(model)
    order, flops = [], {}
    handles = []
    for name, m, _ in layers:
        def hook(mod, inp, out, name=name):
            if name not in flops:
                order.append(name)
                flops[name] = 0
            flops[name] += forward_flops(mod, inp, out)
        handles.append(m.register_forward_hook(hook))
    model.train()  # eval mode lets TransformerEncoderLayer take a fused path that calls no submodule
    with torch.no_grad():
        model(example)
    for h in handles:
        h.remove()
    params = {name: p for name, _, p in layers}
    missing = [name for name in params if name not in flops]
    if missing:
        raise SystemExit(f"layers never called by the forward pass: {missing}")
    return [(name, params[name], float(flops[name])) for name in order]


def measure(model, example, batch, device, steps=10):
    """Per-layer forward and backward milliseconds on `device`, from hooks around every layer."""
    model.to(device).train()
    x = example.repeat(batch, *([1] * (example.dim() - 1))).to(device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    fwd, bwd, starts = {}, {}, {}
    for name, m, _ in layer_modules(model):
        m.register_forward_pre_hook(lambda mod, inp, n=name: (sync(), starts.__setitem__(("f", n), time.perf_counter())))
        m.register_forward_hook(lambda mod, inp, out, n=name: (sync(), fwd.__setitem__(n, fwd.get(n, 0) + time.perf_counter() - starts[("f", n)])))
        m.register_full_backward_pre_hook(lambda mod, g, n=name: (sync(), starts.__setitem__(("b", n), time.perf_counter())))
        m.register_full_backward_hook(lambda mod, gi, go, n=name: (sync(), bwd.__setitem__(n, bwd.get(n, 0) + time.perf_counter() - starts[("b", n)])))
    for _ in range(2):
        model(x).float().sum().backward()
    fwd.clear()
    bwd.clear()
    for _ in range(steps):
        model(x).float().sum().backward()
    return ({n: 1e3 * t / steps for n, t in fwd.items()}, {n: 1e3 * t / steps for n, t in bwd.items()})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", help="resnet50, vgg16, bert_base or mlp")
    parser.add_argument("--model", help="module:callable returning an nn.Module (your own model)")
    parser.add_argument("--input", help="one sample's input shape for --model, e.g. 3,224,224")
    parser.add_argument("--name", help="the profile's name (default: the preset or the callable)")
    parser.add_argument("--batch", type=int, help="batch size the times are for")
    parser.add_argument("--step_ms", type=float, help="forward + backward time of one step to split by FLOPs")
    parser.add_argument("--device_name", default="stated step time", help="where --step_ms holds")
    parser.add_argument("--measure", action="store_true", help="measure per-layer times on --device instead")
    parser.add_argument("--device", default="cpu", help="torch device for --measure (cpu, cuda, cuda:1)")
    args = parser.parse_args()

    if args.preset:
        model, example, batch, step_ms = preset(args.preset)
        name = args.name or args.preset
    elif args.model and args.input:
        module, _, attr = args.model.partition(":")
        model = getattr(importlib.import_module(module), attr)()
        example = torch.randn(1, *[int(d) for d in args.input.split(",")])
        batch, step_ms, name = 32, None, args.name or attr
    else:
        parser.error("give --preset, or --model and --input")
    batch = args.batch or batch
    step_ms = args.step_ms or step_ms
    layers = profile(model, example, batch)
    out = {"name": name, "batch_size": batch, "layers": []}
    if args.measure:
        fwd, bwd = measure(model, example, batch, args.device)
        out["device"] = args.device
        out["source"] = f"make_profile.py --measure: torch {torch.__version__} hooks, batch {batch}, mean of 10 steps"
        times = [(fwd.get(n, 0.0), bwd.get(n, 0.0)) for n, _, _ in layers]
    else:
        if step_ms is None:
            parser.error("give --step_ms (or --measure)")
        total = sum(f for _, _, f in layers)
        out["device"] = args.device_name
        out["source"] = (f"make_profile.py: torch {torch.__version__} architecture, exact parameter counts; "
                         f"a step of {step_ms} ms (batch {batch}) split by forward-FLOP share, backward = 2 x forward")
        times = [(step_ms / 3 * f / total, 2 * step_ms / 3 * f / total) for _, _, f in layers]
    for (lname, params, flops), (f_ms, b_ms) in zip(layers, times):
        out["layers"].append({"name": lname, "params": params, "flops": flops,
                              "forward_ms": round(f_ms, 6), "backward_ms": round(b_ms, 6)})
    out["step_ms"] = round(sum(f + b for f, b in times), 6)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    print(f"{name}: {len(layers)} layers, {sum(p for _, p, _ in layers):,} parameters", file=sys.stderr)


if __name__ == "__main__":
    main()
