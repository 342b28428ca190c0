#!/usr/bin/python3
"""Writes a class-folder set of 5-channel 16-bit cells the way the workshop's data is most often made in
Python: tifffile.imwrite(path, hwc) with no options, which stores an [H, W, 5] array as H pages of W x 5
(tifffile's shaped series), not one page of 5 samples.

usage: make_workshop_cells.py OUT_DIR [CLASSES] [PER_CLASS] [SIDE]

Each class draws its channels' intensities from its own means, so that the classes can be told apart.
"""
import os
import sys

import numpy as np
import tifffile

out = sys.argv[1]
classes = int(sys.argv[2]) if len(sys.argv) > 2 else 8
per_class = int(sys.argv[3]) if len(sys.argv) > 3 else 12
side = int(sys.argv[4]) if len(sys.argv) > 4 else 24
rng = np.random.default_rng(35)
yy, xx = np.mgrid[0:side, 0:side] - (side - 1) / 2.0
for k in range(classes):
    folder = os.path.join(out, f"celltype{k}")
    os.makedirs(folder, exist_ok=True)
    brightness = rng.uniform(2000, 40000, size=5)
    for i in range(per_class):
        radius = rng.uniform(0.2, 0.45) * side
        cell = np.exp(-(yy ** 2 + xx ** 2) / (2 * radius ** 2))
        hwc = np.stack([cell * b * rng.uniform(0.8, 1.2) for b in brightness], axis=-1)
        hwc += rng.normal(0, 500, size=hwc.shape)
        tifffile.imwrite(os.path.join(folder, f"cell{i:03d}.tif"), np.clip(hwc, 0, 65535).astype(np.uint16))
