#!/usr/bin/python3
"""The reference loader of bench/loader.sh: a torch DataLoader with N workers over the same files as
build/bench/pcdino_loader_bench, each item read, decoded and multi-cropped the reference's way, batches
collated by default_collate. Prints the same JSON line.

--set tiff: the workshop's multi-channel TIFFs as scDINO reads them (tifffile.imread, the selected channels,
    each scaled to [0, 1] by its own min and max) and scDINO's channel-wise multi-crop on tensors
    (bench/dino_reference.py's MultiCrop, which restates it), normalised by mean 0.5, std 0.25.
--set jpeg: ImageNet-like JPEGs as DINO reads them (torchvision's ImageFolder, PIL, RGB) and DINO's own
    DataAugmentationDINO (facebookresearch/dino main_dino.py at 7c446df, restated here on torchvision's
    transforms): per crop RandomResizedCrop (bicubic), horizontal flip p 0.5, ColorJitter(0.4, 0.4, 0.2,
    0.1) with p 0.8, grayscale p 0.2; PIL Gaussian blur with radius U(0.1, 2.0) at p 1.0 / 0.1 / 0.5 (first
    global, second global, local); solarisation p 0.2 on the second global crop; ToTensor and ImageNet's
    mean/std.

usage: loader_reference.py --set tiff|jpeg DATASET [--workers N] [--images N] [--batch B]
       [--global-size PX] [--local-size PX] [--local-crops N] [--channels I,J,...]
One batch made before the loader starts is not timed (caches warm); the loader is timed from its start,
its workers' start included, as pcdino_loader_bench's.
"""
import argparse
import json
import os
import random
import sys
import time

import numpy as np
import torch
from PIL import ImageFilter, ImageOps
from torchvision import datasets, transforms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dino_reference import MultiCrop  # noqa: E402


class PilGaussianBlur:
    """DINO's GaussianBlur: with probability p, PIL's Gaussian blur of radius U(radius_min, radius_max)."""

    def __init__(self, p, radius_min=0.1, radius_max=2.0):
        self.p, self.radius_min, self.radius_max = p, radius_min, radius_max

    def __call__(self, img):
        if random.random() >= self.p:
            return img
        return img.filter(ImageFilter.GaussianBlur(radius=random.uniform(self.radius_min, self.radius_max)))


class PilSolarize:
    """DINO's Solarization: with probability p, PIL's ImageOps.solarize (threshold 128)."""

    def __init__(self, p):
        self.p = p

    def __call__(self, img):
        return ImageOps.solarize(img) if random.random() < self.p else img


class DinoRgbMultiCrop:
    """DINO's DataAugmentationDINO, with its defaults (scales 0.4-1 and 0.05-0.4) and the given sizes."""

    def __init__(self, global_size, local_size, local_crops):
        bicubic = transforms.InterpolationMode.BICUBIC
        jitter = transforms.Compose([
            transforms.RandomHorizontalFlip(p=0.5),
            transforms.RandomApply([transforms.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8),
            transforms.RandomGrayscale(p=0.2),
        ])
        normalize = transforms.Compose([
            transforms.ToTensor(), transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
        self.global1 = transforms.Compose([
            transforms.RandomResizedCrop(global_size, scale=(0.4, 1.0), interpolation=bicubic),
            jitter, PilGaussianBlur(1.0), normalize])
        self.global2 = transforms.Compose([
            transforms.RandomResizedCrop(global_size, scale=(0.4, 1.0), interpolation=bicubic),
            jitter, PilGaussianBlur(0.1), PilSolarize(0.2), normalize])
        self.local = transforms.Compose([
            transforms.RandomResizedCrop(local_size, scale=(0.05, 0.4), interpolation=bicubic),
            jitter, PilGaussianBlur(0.5), normalize])
        self.local_crops = local_crops

    def __call__(self, image):
        return [self.global1(image), self.global2(image)] + [self.local(image) for _ in range(self.local_crops)]


class TiffCells(torch.utils.data.Dataset):
    """The class folders' TIFFs in ImageFolder's order, each [C, H, W] in [0, 1] through `transform`."""

    def __init__(self, root, channels, transform):
        import tifffile

        self.tifffile = tifffile
        folder = datasets.DatasetFolder(root, loader=lambda p: p, extensions=(".tif", ".tiff"))
        self.paths = [p for p, _ in folder.samples]
        self.channels, self.transform = channels, transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        hwc = self.tifffile.imread(self.paths[i])
        if hwc.ndim == 2:
            hwc = hwc[:, :, None]
        if self.channels:
            hwc = hwc[:, :, self.channels]
        x = torch.from_numpy(hwc.astype(np.float32)).permute(2, 0, 1).contiguous()
        lo = x.amin(dim=(1, 2), keepdim=True)
        span = x.amax(dim=(1, 2), keepdim=True) - lo
        x = (x - lo) / torch.where(span > 0, span, torch.ones_like(span))
        return self.transform(x), 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set", choices=("tiff", "jpeg"), required=True)
    p.add_argument("dataset")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--images", type=int, default=512)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--global-size", type=int, default=224)
    p.add_argument("--local-size", type=int, default=96)
    p.add_argument("--local-crops", type=int, default=8)
    p.add_argument("--channels", default="")
    a = p.parse_args()
    channels = [int(c) for c in a.channels.split(",") if c]
    if a.set == "jpeg":
        data = datasets.ImageFolder(a.dataset, DinoRgbMultiCrop(a.global_size, a.local_size, a.local_crops))
    else:
        h = {"global_crops_size": a.global_size, "local_crops_size": a.local_size,
             "global_crops_scale": (0.4, 1.0), "local_crops_scale": (0.05, 0.4),
             "local_crops_number": a.local_crops}
        first = TiffCells(a.dataset, channels, lambda x: x)[0][0]
        c = first.shape[0]
        data = TiffCells(a.dataset, channels, MultiCrop(h, [0.5] * c, [0.25] * c))
    steps = max(1, a.images // a.batch)
    index = [i % len(data) for i in range(steps * a.batch)]
    crops = torch.utils.data.default_collate([data[i] for i in index[:a.batch]])[0]  # untimed: caches warm
    loader = torch.utils.data.DataLoader(torch.utils.data.Subset(data, index), batch_size=a.batch,
                                         num_workers=a.workers, drop_last=True)
    start = time.perf_counter()
    images = 0
    for batch, _ in loader:
        images += batch[0].shape[0]
    seconds = time.perf_counter() - start
    print(json.dumps({"threads": a.workers, "images": images, "seconds": round(seconds, 3),
                      "images_per_second": round(images / seconds, 2), "batch": a.batch,
                      "crops": ["[" + ",".join(str(d) for d in t.shape) + "]" for t in crops]}))


if __name__ == "__main__":
    main()
