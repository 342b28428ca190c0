#!/usr/bin/python3
"""Baseline for bench/train.sh: one DINO training step in Python PyTorch (Debian's python3-torch).

The step of facebookresearch/dino's main_dino.py (train_one_epoch) for the model of its
vision_transformer.py (pre-norm ViT, DINOHead with a weight-normalised last layer, MultiCropWrapper that
runs same-sized crops together), written out here because the original needs network access to fetch.
Crops are random tensors, so data loading is not part of the time (pcdino's rows include it, except
its --synthetic-crops rows). The student has DINO's drop_path_rate 0.1, as pcdino's.

usage: baseline_dino_step.py [--threads N] [--steps N] [--warmup N] [--batch N] [--device cpu|cuda]
                             [--amp none|bfloat16|float16] [--drop-path P] [--attention sdpa|explicit]
                             [--compile MODE]   prints seconds per step (mean); with --compile, then the
                                                compile seconds (the first step's time less a timed step's)
       baseline_dino_step.py ... --kernel-floor    prints the timed steps' GPU kernel seconds per step instead
       baseline_dino_step.py ... --losses          prints each step's loss, one a line, instead
On a GPU, --amp runs the forward pass under torch.autocast as main_dino.py's use_fp16 does (float16 with
its GradScaler; bfloat16 needs none). --attention sdpa (the default where PyTorch has it, 2.0 on) computes
attention with F.scaled_dot_product_attention, as DINOv2's code and pcdino do (flash or memory-efficient
kernels on a GPU); explicit is vision_transformer.py's softmax(q k^T / sqrt(d)) v, 1.13's only choice.
--compile MODE (default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs) runs the forward pass
and the loss through torch.compile with that mode as one graph (fullgraph; PyTorch 2.0 on); the backward
pass is compiled with them (AOTAutograd), the gradient clipping and the optimizer stay eager as in
main_dino.py.
Exit codes: 0 success, 2 bad usage, 69 an option this PyTorch cannot run (--compile, --attention sdpa on 1.x).
"""
import argparse
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim, heads, sdpa):
        super().__init__()
        self.heads, self.scale, self.sdpa = heads, (dim // heads) ** -0.5, sdpa
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        if self.sdpa:  # its default scale is 1/sqrt(head dim), self.scale
            out = F.scaled_dot_product_attention(q, k, v)
        else:
            out = (q @ k.transpose(-2, -1) * self.scale).softmax(dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, n, c))


def drop_path(x, p, training):
    """Stochastic depth as vision_transformer.py's drop_path: each sample's branch dropped with p."""
    if p == 0.0 or not training:
        return x
    keep = 1 - p
    mask = (keep + torch.rand((x.shape[0],) + (1,) * (x.ndim - 1), dtype=x.dtype, device=x.device)).floor_()
    return x.div(keep) * mask


class Block(nn.Module):
    def __init__(self, dim, heads, drop_path_rate, sdpa):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(dim, eps=1e-6), Attention(dim, heads, sdpa)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.drop_path = drop_path_rate

    def forward(self, x):
        x = x + drop_path(self.attn(self.norm1(x)), self.drop_path, self.training)
        return x + drop_path(self.mlp(self.norm2(x)), self.drop_path, self.training)


class VisionTransformer(nn.Module):
    def __init__(self, dim, heads, patch, channels, image, drop_path_rate=0.0, depth=12, sdpa=False):
        super().__init__()
        self.patch = patch
        self.proj = nn.Conv2d(channels, dim, patch, patch)
        grid = image // patch
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, grid * grid + 1, dim) * 0.02)
        # Stochastic depth rising linearly over the blocks (torch.linspace(0, drop_path_rate, depth)).
        rates = torch.linspace(0, drop_path_rate, depth).tolist()
        self.blocks = nn.ModuleList([Block(dim, heads, rate, sdpa) for rate in rates])
        self.norm = nn.LayerNorm(dim, eps=1e-6)

    def pos_encoding(self, patches, height):
        n = self.pos_embed.shape[1] - 1
        if patches == n:
            return self.pos_embed
        side, rows = int(math.sqrt(n)), height // self.patch + 0.1
        grid = self.pos_embed[:, 1:].reshape(1, side, side, -1).permute(0, 3, 1, 2)
        grid = F.interpolate(grid, scale_factor=(rows / side, rows / side), mode="bicubic")
        return torch.cat([self.pos_embed[:, :1], grid.permute(0, 2, 3, 1).reshape(1, -1, grid.shape[1])], 1)

    def forward(self, images):
        x = self.proj(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1)
        x = x + self.pos_encoding(x.shape[1] - 1, images.shape[2])
        for block in self.blocks:
            x = block(x)
        return self.norm(x)[:, 0]


class DINOHead(nn.Module):
    def __init__(self, dim, out_dim):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.GELU(),
                                 nn.Linear(2048, 256))
        self.last_layer = nn.utils.weight_norm(nn.Linear(256, out_dim, bias=False))
        self.last_layer.weight_g.data.fill_(1)
        self.last_layer.weight_g.requires_grad = False

    def forward(self, x):
        return self.last_layer(F.normalize(self.mlp(x), dim=-1))


class MultiCropWrapper(nn.Module):
    def __init__(self, backbone, head):
        super().__init__()
        self.backbone, self.head = backbone, head

    def forward(self, crops):
        groups, start = [], 0
        while start < len(crops):
            end = start + 1
            while end < len(crops) and crops[end].shape[-1] == crops[start].shape[-1]:
                end += 1
            groups.append(self.backbone(torch.cat(crops[start:end])))
            start = end
        return self.head(torch.cat(groups))


COMPILE_MODES = ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


def unavailable(what):
    """Exits 69 (EX_UNAVAILABLE): an option this PyTorch cannot run."""
    print(f"baseline_dino_step.py: {what}; this is PyTorch {torch.__version__}", file=sys.stderr)
    sys.exit(69)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2, help="first steps not timed (allocator warm-up)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--out-dim", type=int, default=4096)
    p.add_argument("--depth", type=int, default=12, help="blocks of the ViT")
    p.add_argument("--patch", type=int, default=4)
    p.add_argument("--global-size", type=int, default=28, help="global crops' side, pixels")
    p.add_argument("--local-size", type=int, default=16, help="local crops' side, pixels")
    p.add_argument("--locals", type=int, default=6, help="local crops per image")
    p.add_argument("--profile", action="store_true", help="print torch.profiler's table of the timed steps")
    p.add_argument("--kernel-floor", action="store_true",
                   help="print the timed steps' kernel time per step on the GPU (torch.profiler, CUPTI), not their time")
    p.add_argument("--device", default="cpu")
    p.add_argument("--amp", default="none", choices=["none", "bfloat16", "float16"])
    p.add_argument("--drop-path", type=float, default=0.1,
                   help="the student's drop_path_rate (DINO's and pcdino's default 0.1; the teacher has none)")
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    p.add_argument("--attention", choices=["sdpa", "explicit"], default="sdpa" if has_sdpa else "explicit",
                   help="F.scaled_dot_product_attention or softmax(q k^T / sqrt(d)) v (default: sdpa from PyTorch 2.0)")
    p.add_argument("--compile", default="none", choices=["none"] + COMPILE_MODES,
                   help="torch.compile's mode for the forward pass and the loss (none: eager)")
    p.add_argument("--compile-backend", default="inductor",
                   help="torch.compile's backend (inductor; aot_eager traces and differentiates the same graph"
                        " but runs it eagerly: a check that needs no compiler)")
    p.add_argument("--losses", action="store_true", help="print each step's loss instead of the time")
    args = p.parse_args()
    if args.attention == "sdpa" and not has_sdpa:
        unavailable("--attention sdpa needs F.scaled_dot_product_attention (PyTorch 2.0 or later)")
    if args.compile != "none" and not hasattr(torch, "compile"):
        unavailable("--compile needs torch.compile (PyTorch 2.0 or later)")
    if args.compile != "none" and args.compile_backend not in torch._dynamo.list_backends(exclude_tags=()):
        p.error(f"--compile-backend {args.compile_backend}: not one of {', '.join(torch._dynamo.list_backends())}")
    device = torch.device(args.device)
    amp = {"none": None, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.amp]
    scaler = torch.cuda.amp.GradScaler() if amp == torch.float16 else None
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    def network(drop_path_rate):
        vit = VisionTransformer(192, 3, args.patch, 1, args.global_size, drop_path_rate, args.depth,
                                args.attention == "sdpa")
        return MultiCropWrapper(vit, DINOHead(192, args.out_dim))

    student, teacher = network(args.drop_path).to(device), network(0.0).to(device)
    teacher.load_state_dict(student.state_dict())
    for param in teacher.parameters():
        param.requires_grad = False
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-4)
    center = torch.zeros(1, args.out_dim, device=device)
    crops = [torch.randn(args.batch, 1, args.global_size, args.global_size, device=device) for _ in range(2)]
    crops += [torch.randn(args.batch, 1, args.local_size, args.local_size, device=device)
              for _ in range(args.locals)]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    seconds = []
    activities = [torch.profiler.ProfilerActivity.CPU]
    if args.kernel_floor:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    profiler = torch.profiler.profile(activities=activities)
    def forward_loss(crops, center):
        """The teacher's and the student's forward passes and DINOLoss (main_dino.py): (loss, teacher output)."""
        with torch.autocast(device.type, dtype=amp or torch.bfloat16, enabled=amp is not None):
            teacher_out = teacher(crops[:2])
            student_out = (student(crops) / 0.1).chunk(len(crops))
            targets = F.softmax((teacher_out - center) / 0.04, dim=-1).detach().chunk(2)
            loss, terms = 0, 0
            for iq, q in enumerate(targets):
                for v, s in enumerate(student_out):
                    if v != iq:
                        loss = loss + torch.sum(-q * F.log_softmax(s, dim=-1), dim=-1).mean()
                        terms += 1
            return loss / terms, teacher_out

    if args.compile != "none":
        # fullgraph: a graph break would leave part of the step eager and the bar lower than it claims
        forward_loss = torch.compile(forward_loss, fullgraph=True, backend=args.compile_backend,
                                     mode=None if args.compile == "default" else args.compile)
    losses, first = [], None
    for step in range(args.warmup + args.steps):
        if (args.profile or args.kernel_floor) and step == args.warmup:
            profiler.__enter__()
        sync()
        start = time.perf_counter()
        loss, teacher_out = forward_loss(crops, center)
        losses.append(loss.item())  # main_dino.py checks math.isfinite(loss.item()) every step
        optimizer.zero_grad()
        if scaler:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
        else:
            loss.backward()
        for param in student.parameters():  # utils.clip_gradients(student, 3.0)
            if param.grad is None:
                continue
            norm = param.grad.data.norm(2)
            param.grad.data.mul_(min(1.0, 3.0 / (norm.item() + 1e-6)))
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        with torch.no_grad():
            center = center * 0.9 + teacher_out.mean(0, keepdim=True) * 0.1
            for t, s in zip(teacher.parameters(), student.parameters()):
                t.mul_(0.996).add_(s.detach(), alpha=0.004)
        sync()
        if step == 0:
            first = time.perf_counter() - start
        if step >= args.warmup:
            seconds.append(time.perf_counter() - start)
    if args.profile or args.kernel_floor:
        profiler.__exit__(None, None, None)
    if args.profile:
        print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=40), file=sys.stderr)
    mean = sum(seconds) / len(seconds)
    if args.losses:
        print("\n".join(f"{loss:.6f}" for loss in losses))
    elif args.kernel_floor:
        print(f"{kernel_seconds(profiler.events()) / args.steps:.4f}")
    elif args.compile != "none":
        print(f"{mean:.4f} {max(first - mean, 0.0):.1f}")
    else:
        print(f"{mean:.3f}")


def kernel_seconds(events):
    """The GPU activities' time (s) among torch.profiler's events: those on the device, user annotations
    left out, as the footer of torch.profiler's table adds up "Self CUDA time total"."""
    device = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA
              and not getattr(e, "is_user_annotation", False)]
    return sum(getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
               for e in device) / 1e6


if __name__ == "__main__":
    main()
