#!/usr/bin/python3
"""Writes a synthetic class-folder TIFF dataset with tifffile (an independent writer) whose per-channel
mean and population std after per-image min-max scaling are known in closed form, and prints them as JSON.

usage: make_synthetic.py OUT_DIR {u16x5|u8x1} [CLASSES] [PER_CLASS]

Each channel is either a Bernoulli channel (k of the P pixels at the image's high value, the rest at its
low value: after scaling mean k/P, std sqrt(p(1-p))) or a ramp (low + j*step: after scaling j/(P-1),
mean 1/2, variance (P^2-1)/12/(P-1)^2). Low, high, step and pixel order change per image.
"""
import json
import math
import os
import sys

import numpy as np
import tifffile

out, kind = sys.argv[1], sys.argv[2]
classes = int(sys.argv[3]) if len(sys.argv) > 3 else 3
per_class = int(sys.argv[4]) if len(sys.argv) > 4 else 20
side = 8
pixels = side * side
if kind == "u16x5":
    dtype, top, specs = np.uint16, 65535, [("b", 1), ("b", 17), ("ramp", 0), ("b", 32), ("b", 63)]
elif kind == "u8x1":
    dtype, top, specs = np.uint8, 255, [("b", 9)]
else:
    sys.exit("unknown kind " + kind)

rng = np.random.default_rng(2024)
for k in range(classes):
    os.makedirs(os.path.join(out, f"class{k}"), exist_ok=True)
    for i in range(per_class):
        img = np.zeros((pixels, len(specs)), dtype=np.float64)
        for c, (what, ones) in enumerate(specs):
            low = int(rng.integers(0, top // 4))
            order = rng.permutation(pixels)
            if what == "ramp":
                step = (top - low) // (pixels - 1)
                img[order, c] = low + np.arange(pixels) * step
            else:
                high = int(rng.integers(low + 1, top + 1))
                img[order, c] = np.where(np.arange(pixels) < ones, high, low)
        tifffile.imwrite(os.path.join(out, f"class{k}", f"img{i:03d}.tif"),
                         img.reshape(side, side, len(specs)).astype(dtype).squeeze(),
                         photometric="minisblack", planarconfig="contig")

mean, std = [], []
for what, ones in specs:
    if what == "ramp":
        mean.append(0.5)
        std.append(math.sqrt((pixels * pixels - 1) / 12.0) / (pixels - 1))
    else:
        p = ones / pixels
        mean.append(p)
        std.append(math.sqrt(p * (1 - p)))
print(json.dumps({"mean": mean, "std": std}))
