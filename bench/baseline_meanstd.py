#!/usr/bin/python3
"""The workshop's mean/std logic in Python, as the baseline of bench/meanstd.sh: torchvision's ImageFolder
with tifffile as the loader, per-image min-max scaling in numpy, population moments over all pixels of
the images (all of them here: fraction 1.0). Prints the mean, the std and, last, the seconds it took.

usage: baseline_meanstd.py DATASET_DIR
"""
import sys
import time

import numpy as np
import tifffile
from torchvision import datasets

start = time.perf_counter()
dataset = datasets.ImageFolder(sys.argv[1], loader=tifffile.imread)
total = total_sq = count = 0.0
for path, _ in dataset.samples:
    image = dataset.loader(path).astype(np.float64)
    lo, hi = image.min(), image.max()
    image = (image - lo) / (hi - lo if hi > lo else 1.0)
    total += image.sum()
    total_sq += (image * image).sum()
    count += image.size
mean = total / count
print(f"mean {mean:.6f} std {np.sqrt(total_sq / count - mean * mean):.6f} images {len(dataset.samples)}", file=sys.stderr)
print(f"{time.perf_counter() - start:.3f}")
