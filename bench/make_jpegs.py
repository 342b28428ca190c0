#!/usr/bin/python3
"""Writes an ImageNet-like class-folder set for bench/loader.sh: 3-channel JPEGs of about 500x375 px
(ImageNet's typical size), each a smooth random scene (blurred colour noise with a few shapes), so that
the JPEG's entropy and decode cost are a photograph's rather than flat colour's.

usage: make_jpegs.py OUT_DIR [CLASSES] [PER_CLASS]
"""
import os
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

out = sys.argv[1]
classes = int(sys.argv[2]) if len(sys.argv) > 2 else 8
per_class = int(sys.argv[3]) if len(sys.argv) > 3 else 32
rng = np.random.default_rng(35)
for k in range(classes):
    folder = os.path.join(out, f"class{k}")
    os.makedirs(folder, exist_ok=True)
    for i in range(per_class):
        w, h = int(rng.integers(440, 560)), int(rng.integers(330, 420))
        noise = rng.integers(0, 256, size=(h // 8, w // 8, 3), dtype=np.uint8)
        img = Image.fromarray(noise).resize((w, h), Image.BICUBIC).filter(ImageFilter.GaussianBlur(3))
        draw = ImageDraw.Draw(img)
        for _ in range(6):
            x0, y0 = int(rng.integers(0, w - 40)), int(rng.integers(0, h - 40))
            x1, y1 = x0 + int(rng.integers(20, 200)), y0 + int(rng.integers(20, 200))
            draw.ellipse((x0, y0, x1, y1), fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
        grain = rng.normal(0, 8, size=(h, w, 3))
        pixels = np.clip(np.asarray(img, dtype=np.float64) + grain, 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(os.path.join(folder, f"img{i:04d}.jpg"), quality=90)
