#!/usr/bin/python3
"""The mean/std stage's values computed with numpy over tifffile.imread arrays, indexed as the workshop
indexes them (channels last: image[:, :, c]), each channel of each image min-max scaled to [0, 1] (range 1
where constant), then the mean and population std of all the pixels of all the images, per channel.
Every image of the class folders is used (the stage's fraction_for_mean_std_calc must be 1.0).

usage: numpy_mean_std.py DATASET_DIR  -> prints {"mean": [...], "std": [...]}
"""
import glob
import json
import os
import sys

import numpy as np
import tifffile

files = sorted(glob.glob(os.path.join(sys.argv[1], "*", "*.tif")))
planes = []
for f in files:
    image = tifffile.imread(f).astype(np.float64)
    for_channels = image if image.ndim == 3 else image[:, :, np.newaxis]
    lo = for_channels.min(axis=(0, 1))
    span = for_channels.max(axis=(0, 1)) - lo
    span[span == 0] = 1
    planes.append(((for_channels - lo) / span).reshape(-1, for_channels.shape[2]))
pixels = np.concatenate(planes)
print(json.dumps({"mean": pixels.mean(axis=0).tolist(), "std": pixels.std(axis=0).tolist(), "images": len(files)}))
