#!/usr/bin/env python3
"""DINO's own code on a pcdino pipeline's data, for side-by-side runs (bench/dino_parity.sh).

`train` runs facebookresearch/dino's main_dino.train_dino (its ViT, DINOHead, MultiCropWrapper, DINOLoss,
AdamW parameter groups, cosine schedules, teacher EMA, gradient clipping, fp16 loss scaling, all unchanged)
on the training part of a pcdino pipeline's split, with that pipeline's hyperparameters. Three things are
replaced, each because DINO's fixes ImageNet: the dataset (the pipeline's images and split instead of one
ImageFolder), the augmentation (the pipeline's crop sizes and scDINO's channel-wise multi-crop, as
train/include/pcdino/train/augment.hpp describes it, instead of 224/96-px RGB colour jitter), and the ViT's
input (img_size = the global crop, in_chans = the images' channels). Each epoch's seconds, images/s and mean
loss go to {out}/epochs.jsonl; DINO's own checkpoint.pth and log.txt land in {out}.

`eval` puts teachers through one evaluation: each checkpoint's 'teacher' backbone is loaded strictly into
DINO's VisionTransformer, the CLS features of every image are L2-normalised, and DINO's
eval_knn.knn_classifier votes (k, T from the pipeline's kNN keys) with the training split as the bank and
the held-out split as the queries; the untrained network and the raw pixels are scored the same way.

DINO's code is not part of pcdino: --dino names a checkout (bench/dino_parity.sh says which commit).
Needs torch, torchvision, numpy, Pillow and PyYAML; `train` needs a CUDA GPU (main_dino's own rule).
"""
import argparse
import functools
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import yaml


def load_config(path):
    """The effective pipeline configuration (`pcdino config -c FILE` output)."""
    with open(path) as f:
        return yaml.safe_load(f)


def split(n, train_fraction, seed):
    """pcdino's and scDINO's split (core/include/pcdino/core/split.hpp): numpy's legacy shuffle of 0..n-1
    from `seed`, the first floor((1 - fraction) * n) held out, the rest for training."""
    indices = np.arange(n)
    np.random.seed(seed)
    np.random.shuffle(indices)
    held = int(math.floor((1.0 - train_fraction) * n))
    return indices[held:], indices[:held]


def load_images(dataset_dir):
    """Every image of a class-folder dataset in ImageFolder's order (pcdino's, tests: Dataset.*):
    uint8 [N, C, H, W] and labels [N]."""
    from torchvision import datasets
    from PIL import Image

    folder = datasets.ImageFolder(dataset_dir)
    arrays = []
    for path, _ in folder.samples:
        with Image.open(path) as im:
            a = np.asarray(im)
        arrays.append(a[None] if a.ndim == 2 else a.transpose(2, 0, 1))
    images = torch.from_numpy(np.stack(arrays))
    labels = torch.tensor([label for _, label in folder.samples])
    return images, labels, folder.classes


class MultiCrop:
    """scDINO's multi-crop as pcdino's augment.hpp states it, on tensors [C, H, W] in [0, 1]: 2 global and
    n local random resized crops (bicubic), horizontal flip p 0.5 (vertical p 0.5 with vflip), a
    per-channel brightness factor U(0.5, 1.25) with p 0.8, Gaussian blur (sigma U(0.1, 1.5) s, kernel
    2 round(2 s) + 1, none below s = 0.25; p 1.0 / 0.1 / 0.5), solarisation p 0.2 on the second global
    crop, then normalisation. s = crop size / 224 (global) or / 96 (local) with scale_augmentation_to_crop."""

    def __init__(self, h, mean, std):
        from torchvision import transforms

        self.h = h
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)
        bicubic = transforms.InterpolationMode.BICUBIC
        self.global_crop = transforms.RandomResizedCrop(
            h["global_crops_size"], scale=tuple(h["global_crops_scale"]), interpolation=bicubic)
        self.local_crop = transforms.RandomResizedCrop(
            h["local_crops_size"], scale=tuple(h["local_crops_scale"]), interpolation=bicubic)
        scale = h.get("scale_augmentation_to_crop", True)
        self.global_s = h["global_crops_size"] / 224.0 if scale else 1.0
        self.local_s = h["local_crops_size"] / 96.0 if scale else 1.0

    def _view(self, x, crop, s, blur_p, solarize_p):
        from torchvision.transforms import functional as TF

        y = crop(x).clamp(0, 1)
        if random.random() < 0.5:
            y = TF.hflip(y)
        if self.h.get("vflip", True) and random.random() < 0.5:
            y = TF.vflip(y)
        if random.random() < 0.8:
            factors = torch.empty(y.shape[0], 1, 1).uniform_(0.5, 1.25)
            y = (y * factors).clamp(0, 1)
        if s >= 0.25 and random.random() < blur_p:
            sigma = random.uniform(0.1, 1.5) * s
            y = TF.gaussian_blur(y, 2 * round(2 * s) + 1, sigma)
        if random.random() < solarize_p:
            y = torch.where(y > 0.5, 1 - y, y)
        return (y - self.mean) / self.std

    def __call__(self, x):
        crops = [self._view(x, self.global_crop, self.global_s, 1.0, 0.0),
                 self._view(x, self.global_crop, self.global_s, 0.1, 0.2)]
        crops += [self._view(x, self.local_crop, self.local_s, 0.5, 0.0)
                  for _ in range(self.h["local_crops_number"])]
        return crops


class CropDataset(torch.utils.data.Dataset):
    def __init__(self, images, labels, indices, transform):
        self.images, self.labels, self.indices, self.transform = images, labels, indices, transform

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, i):
        j = int(self.indices[i])
        return self.transform(self.images[j].float() / 255.0), int(self.labels[j])


def import_dino(path):
    # main_dino's option parser asks GitHub for XCiT's models (torch.hub.list); the machines are offline.
    torch.hub.list = lambda *unused, **unused_too: []
    # main_dino's fp16 calls, torch.cuda.amp.{autocast,GradScaler}, are deprecated aliases of torch.amp's.
    amp = torch.cuda.amp
    if not hasattr(amp, "autocast"):
        amp.autocast = lambda enabled=True: torch.amp.autocast("cuda", enabled=enabled)
    if not hasattr(amp, "GradScaler"):
        amp.GradScaler = lambda: torch.amp.GradScaler("cuda")
    sys.path.insert(0, os.path.abspath(path))
    import main_dino
    import utils
    import vision_transformer as vits
    return main_dino, utils, vits


def vit_for(vits, h, in_chans, **kwargs):
    return vits.__dict__[h["arch"]](patch_size=h["patch_size"], img_size=[h["global_crops_size"]],
                                    in_chans=in_chans, **kwargs)


def dino_argv(c, out, workers):
    """main_dino.py's options from the pipeline's keys (the same names: scDINO kept DINO's)."""
    h, t = c["train_scDINO"]["hyperparameters"], c["train_scDINO"]
    for key, value in (("optimizer", "adamw"), ("depth", 0), ("images_are_RGB", False)):
        have = c["meta"].get(key) if key == "images_are_RGB" else h.get(key)
        if have not in (None, value):
            sys.exit(f"dino_reference.py: {key} = {have} is not compared (only {value})")
    argv = ["--data_path", c["meta"]["dataset_dir"], "--output_dir", out, "--num_workers", str(workers),
            "--seed", str(c["meta"]["seed"]), "--epochs", str(t["epochs"]),
            "--batch_size_per_gpu", str(t["batch_size_per_gpu"]), "--saveckp_freq", "0"]
    for key in ("arch", "patch_size", "out_dim", "momentum_teacher", "warmup_teacher_temp", "teacher_temp",
                "warmup_teacher_temp_epochs", "weight_decay", "weight_decay_end", "clip_grad",
                "freeze_last_layer", "lr", "warmup_epochs", "min_lr", "optimizer", "drop_path_rate",
                "local_crops_number"):
        argv += ["--" + key, str(h[key])]
    for key in ("norm_last_layer", "use_bn_in_head", "use_fp16"):
        argv += ["--" + key, str(bool(h[key]))]
    for key in ("global_crops_scale", "local_crops_scale"):
        argv += ["--" + key] + [str(v) for v in h[key]]
    return argv


def train(a):
    c = load_config(a.config)
    main_dino, utils, vits = import_dino(a.dino)
    with open(a.mean_std) as f:
        ms = json.load(f)
    images, labels, _ = load_images(c["meta"]["dataset_dir"])
    train_idx, _ = split(len(labels), c["meta"]["train_datasetsplit_fraction"], c["meta"]["seed"])
    h = c["train_scDINO"]["hyperparameters"]
    in_chans = images.shape[1]
    print(f"dino_reference: {len(train_idx)} training images of {len(labels)}, [C, H, W] = "
          f"{list(images.shape[1:])}", flush=True)

    # The three replacements (module docstring); everything else is main_dino.train_dino as published.
    main_dino.DataAugmentationDINO = lambda *unused: MultiCrop(h, ms["mean"], ms["std"])
    main_dino.datasets.ImageFolder = lambda root, transform: CropDataset(images, labels, train_idx, transform)
    arch = vits.__dict__[h["arch"]]
    vits.__dict__[h["arch"]] = functools.partial(arch, img_size=[h["global_crops_size"]], in_chans=in_chans)
    if a.cpu_smoke:
        cpu_smoke(main_dino, utils)

    inner = main_dino.train_one_epoch
    batch = c["train_scDINO"]["batch_size_per_gpu"]

    def timed_epoch(*args):
        loader, epoch = args[4], args[9]
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.time()
        stats = inner(*args)
        seconds = time.time() - start
        row = {"epoch": epoch + 1, "seconds": seconds, "steps": len(loader),
               "images_per_second": len(loader) * batch / seconds, "loss": stats["loss"],
               "finished_at": time.time()}
        with open(os.path.join(a.out, "epochs.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")
        return stats

    main_dino.train_one_epoch = timed_epoch
    os.makedirs(a.out, exist_ok=True)
    args = main_dino.get_args_parser().parse_args(dino_argv(c, a.out, a.workers))
    main_dino.train_dino(args)


def cpu_smoke(main_dino, utils):
    """For checking this script without a GPU: main_dino's CUDA calls made no-ops, one gloo rank."""
    import torch.distributed as dist

    torch.nn.Module.cuda = lambda self, *a, **k: self
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.cuda.synchronize = lambda *a: None
    utils.SmoothedValue.synchronize_between_processes = lambda self: None  # a CUDA tensor, one rank
    ddp = torch.nn.parallel.DistributedDataParallel
    main_dino.nn.parallel.DistributedDataParallel = lambda m, device_ids=None: ddp(m)

    def init(args):
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29511")
        dist.init_process_group("gloo", world_size=1, rank=0)
        args.rank, args.gpu, args.world_size = 0, 0, 1

    utils.init_distributed_mode = init


def features(model, x, device, batch=1024):
    out = []
    with torch.no_grad():
        for i in range(0, len(x), batch):
            out.append(F.normalize(model(x[i:i + batch].to(device)).float(), dim=1))
    return torch.cat(out)


def evaluate(a):
    c = load_config(a.config)
    _, _, vits = import_dino(a.dino)
    import eval_knn
    with open(a.mean_std) as f:
        ms = json.load(f)
    h = c["train_scDINO"]["hyperparameters"]
    knn = c["downstream_analyses"]["kNN"]["global"]
    ks = [int(k) for k in a.ks.split(",")] if a.ks else [int(k) for k in knn["n_neighbors"]]
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    images, labels, classes = load_images(c["meta"]["dataset_dir"])
    train_idx, held_idx = split(len(labels), c["meta"]["train_datasetsplit_fraction"], c["meta"]["seed"])
    mean = torch.tensor(ms["mean"]).view(1, -1, 1, 1)
    std = torch.tensor(ms["std"]).view(1, -1, 1, 1)
    x = (images.float() / 255.0 - mean) / std
    y = labels.to(device)
    tr, he = torch.from_numpy(train_idx).to(device), torch.from_numpy(held_idx).to(device)

    def score(f):
        return {k: eval_knn.knn_classifier(f[tr], y[tr], f[he], y[he], k, knn["temperature"], len(classes))[0]
                for k in ks}

    results = {"bank": len(train_idx), "queries": len(held_idx), "temperature": knn["temperature"],
               "teachers": {}}
    results["teachers"]["raw pixels"] = {"top1": score(F.normalize(x.flatten(1), dim=1).to(device))}
    torch.manual_seed(c["meta"]["seed"])
    untrained = vit_for(vits, h, images.shape[1]).to(device).eval()
    results["teachers"]["untrained"] = {"top1": score(features(untrained, x, device))}
    for spec in a.checkpoint:
        name, path = spec.split("=", 1)
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
        teacher = {k.removeprefix("module."): v for k, v in ckpt["teacher"].items()}
        backbone = {k[len("backbone."):]: v for k, v in teacher.items() if k.startswith("backbone.")}
        model = vit_for(vits, h, images.shape[1])
        model.load_state_dict(backbone, strict=True)  # names and shapes as DINO's, or an error naming them
        model.to(device).eval()
        results["teachers"][name] = {"top1": score(features(model, x, device)), "checkpoint": path,
                                     "epoch": int(ckpt.get("epoch", -1))}
    print(f"# kNN top-1 (DINO's eval_knn.knn_classifier, T {knn['temperature']}): bank = the "
          f"{len(train_idx)} training images, queries = the {len(held_idx)} held-out images")
    print("%-14s" % "features" + "".join("%8s" % f"k={k}" for k in ks))
    for name, r in results["teachers"].items():
        print("%-14s" % name + "".join("%8.2f" % r["top1"][k] for k in ks))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("train", "eval"):
        s = sub.add_parser(name)
        s.add_argument("--dino", required=True, help="checkout of facebookresearch/dino")
        s.add_argument("--config", required=True, help="effective pipeline YAML (pcdino config -c FILE)")
        s.add_argument("--mean-std", required=True, help="the run's mean_and_std_of_dataset.txt")
    t = sub.choices["train"]
    t.add_argument("--out", required=True, help="folder for DINO's checkpoint.pth, log.txt, epochs.jsonl")
    t.add_argument("--workers", type=int, default=8, help="DataLoader workers")
    t.add_argument("--cpu-smoke", action="store_true", help="no GPU: CUDA calls as no-ops (checks the script)")
    e = sub.choices["eval"]
    e.add_argument("--checkpoint", action="append", default=[], help="NAME=PATH, repeatable")
    e.add_argument("--ks", default="", help="comma-separated k (default: the pipeline's n_neighbors)")
    e.add_argument("--json", default="", help="write the scores here")
    a = p.parse_args()
    train(a) if a.command == "train" else evaluate(a)


if __name__ == "__main__":
    main()
