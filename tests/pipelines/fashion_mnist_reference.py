#!/usr/bin/python3
"""Independent reference for the mean/std stage on Fashion-MNIST, straight from Debian's IDX files with
numpy (no TIFF, no pcdino code): the images `pcdino dataset import --split SPLIT --per-class N` writes, in
the dataset's order (class folders sorted by name, then file name), the mean/std sample of scDINO
(numpy.random.seed(seed); shuffle; keep perm[floor((1 - fraction) * n):]), per-image min-max scaling,
population moments over all pixels.

usage: fashion_mnist_reference.py SOURCE_DIR SPLIT PER_CLASS FRACTION SEED
"""
import gzip
import json
import math
import sys

import numpy as np

source, split, per_class, fraction, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
names = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * d:8 + 4 * d], "big") for d in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


entries = []  # (class folder, file name, pixels)
for name, prefix in [("train", "train"), ("test", "t10k")]:
    if split not in (name, "all"):
        continue
    images = idx(f"{source}/{prefix}-images-idx3-ubyte.gz")
    labels = idx(f"{source}/{prefix}-labels-idx1-ubyte.gz")
    taken = [0] * 10
    for i, label in enumerate(labels):
        if per_class and taken[label] >= per_class:
            continue
        taken[label] += 1
        entries.append((names[label], f"{name}_{i:05d}.tif", images[i]))
entries.sort(key=lambda e: (e[0], e[1]))

n = len(entries)
indices = np.arange(n)
np.random.seed(seed)
np.random.shuffle(indices)
sample = indices[int(math.floor((1 - fraction) * n)):]
pixels = np.stack([entries[i][2].astype(np.float64) for i in sample])
lo = pixels.min(axis=(1, 2), keepdims=True)
hi = pixels.max(axis=(1, 2), keepdims=True)
scaled = (pixels - lo) / np.where(hi > lo, hi - lo, 1.0)
print(json.dumps({"mean": [float(scaled.mean())], "std": [float(scaled.std())], "images": int(len(sample))}))
