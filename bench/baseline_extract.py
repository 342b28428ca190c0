#!/usr/bin/python3
"""Baseline for bench/extract.sh: CLS feature extraction in Python PyTorch (Debian's python3-torch).

What scDINO's compute_CLS_features does per image, single process: read the TIFF (tifffile), scale to
[0, 1], normalise per channel, and embed batches with the ViT of baseline_dino_step.py (the reference's
architecture) under torch.no_grad(), L2-normalising the CLS tokens. The images are the ones listed in
pcdino's image_paths.csv (the held-out split), so both sides embed the same files.

usage: baseline_extract.py --paths CSV --root DIR --mean M --std S [--patch P] [--batch B] [--threads N]
prints: images seconds
"""
import argparse
import os
import sys
import time

import numpy as np
import tifffile
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from baseline_dino_step import VisionTransformer  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--paths", required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--mean", type=float, required=True)
    p.add_argument("--std", type=float, required=True)
    p.add_argument("--patch", type=int, default=4)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = VisionTransformer(192, 3, args.patch, 1, 28).eval()
    with open(args.paths) as f:
        paths = [line.strip() for line in f if line.strip()]
    start = time.perf_counter()
    features = []
    with torch.no_grad():
        for b in range(0, len(paths), args.batch):
            batch = [tifffile.imread(os.path.join(args.root, rel)) for rel in paths[b:b + args.batch]]
            x = torch.from_numpy(np.stack(batch).astype(np.float32) / 255.0).unsqueeze(1)
            x = (x - args.mean) / args.std
            features.append(F.normalize(model(x), dim=1))
    torch.cat(features)
    print(len(paths), f"{time.perf_counter() - start:.3f}")


if __name__ == "__main__":
    main()
