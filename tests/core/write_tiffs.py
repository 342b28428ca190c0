#!/usr/bin/python3
"""Writes TIFFs the ways Python users write them (tifffile, an independent writer) and what each must
read as, for tests/core/test_image.cpp.

usage: write_tiffs.py OUT_DIR

OUT_DIR/cases.json lists {"file", "expect": {"shape": [C, H, W], "dtype", "data": "FILE.chw"} or
{"refused": "words of the error"}}. The expected [C, H, W] array is tifffile.imread's, its channel axis
the one tifffile's series names (C or S: ImageJ's, OME's, a named axis, an RGB page's samples) and, where
tifffile names none (its default write of an [H, W, C] array: axes "QYX"), the last, as the workshop
indexes it (`tifffile.imread(path)[:, :, selected_channels]`).
"""
import json
import os
import sys

import numpy as np
import tifffile

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(35)
H, W = 11, 9  # unequal, and unequal to any channel count: a swapped axis cannot pass


def pixels(shape, dtype):
    top = 255 if dtype == np.uint8 else 65535
    if dtype == np.float32:
        return rng.standard_normal(shape).astype(np.float32)
    return rng.integers(0, top + 1, size=shape).astype(dtype)


cases = []


def expect(name):
    path = os.path.join(out, name)
    with tifffile.TiffFile(path) as tif:
        axes = tif.series[0].axes
    arr = tifffile.imread(path)
    channel = next((axes.index(a) for a in "CS" if a in axes), None)
    if arr.ndim == 2:
        chw = arr[np.newaxis]
    else:
        chw = np.moveaxis(arr, channel if channel is not None else arr.ndim - 1, 0)
    chw = np.ascontiguousarray(chw)
    chw.tofile(path + ".chw")
    cases.append({"file": name, "axes": axes, "pages": len(tifffile.TiffFile(path).pages),
                  "expect": {"shape": list(chw.shape), "dtype": str(chw.dtype), "data": name + ".chw"}})


def refused(name, words):
    cases.append({"file": name, "refused": words})


# tifffile's default write of [H, W, C] arrays: 5 channels become H pages of W x 5 with {"shape": ...};
# 3 channels one RGB page.
for c, dtype in ((5, np.uint16), (5, np.uint8), (3, np.uint8), (3, np.uint16), (2, np.float32)):
    name = f"default_hwc{c}_{np.dtype(dtype).name}.tif"
    tifffile.imwrite(os.path.join(out, name), pixels((H, W, c), dtype))
    expect(name)

chw = pixels((5, H, W), np.uint16)
tifffile.imwrite(os.path.join(out, "imagej_5ch.tif"), chw, imagej=True, metadata={"axes": "CYX"})
expect("imagej_5ch.tif")
tifffile.imwrite(os.path.join(out, "ome_5ch.ome.tif"), chw, metadata={"axes": "CYX"})
expect("ome_5ch.ome.tif")
tifffile.imwrite(os.path.join(out, "named_axes_cyx.tif"), chw, metadata={"axes": "CYX"})
expect("named_axes_cyx.tif")
tifffile.imwrite(os.path.join(out, "one_page_contig.tif"), pixels((H, W, 5), np.uint16), photometric="minisblack",
                 planarconfig="contig")
expect("one_page_contig.tif")
tifffile.imwrite(os.path.join(out, "one_page_planar.tif"), chw, photometric="minisblack", planarconfig="separate")
expect("one_page_planar.tif")

# One page whose description names its axes (the page is 5 rows of 11 x 9 samples); an image one pixel wide.
tifffile.imwrite(os.path.join(out, "one_page_named_cyx.tif"), chw, photometric="minisblack", planarconfig="contig",
                 metadata={"axes": "CYX"})
expect("one_page_named_cyx.tif")
tifffile.imwrite(os.path.join(out, "default_one_pixel_wide.tif"), pixels((H, 1, 5), np.uint16))
expect("default_one_pixel_wide.tif")

# Refused: pages of differing shapes, pages without metadata, a z-stack, a broken chain of pages.
with tifffile.TiffWriter(os.path.join(out, "differing_pages.tif")) as tif:
    tif.write(pixels((H, W), np.uint16), metadata=None)
    tif.write(pixels((7, 6), np.uint16), metadata=None)
refused("differing_pages.tif", "pages of differing shapes")
with tifffile.TiffWriter(os.path.join(out, "no_metadata.tif")) as tif:
    tif.write(pixels((H, W), np.uint16), metadata=None)
    tif.write(pixels((H, W), np.uint16), metadata=None)
refused("no_metadata.tif", "whose metadata does not say how they form one image")
tifffile.imwrite(os.path.join(out, "imagej_zstack.tif"), pixels((3, H, W), np.uint16), imagej=True,
                 metadata={"axes": "ZYX"})
refused("imagej_zstack.tif", "3 slice(s)")
tifffile.imwrite(os.path.join(out, "ome_zstack.ome.tif"), pixels((3, H, W), np.uint16), metadata={"axes": "ZYX"})
refused("ome_zstack.ome.tif", "SizeZ 3")

name = "broken_second_page.tif"
tifffile.imwrite(os.path.join(out, name), pixels((H, W, 5), np.uint16))
with open(os.path.join(out, name), "r+b") as f:  # classic little-endian TIFF: page 0's next-IFD offset
    f.seek(4)
    ifd = int.from_bytes(f.read(4), "little")
    f.seek(ifd)
    entries = int.from_bytes(f.read(2), "little")
    f.seek(ifd + 2 + 12 * entries)
    f.write((os.path.getsize(os.path.join(out, name)) + 4096).to_bytes(4, "little"))
refused(name, "cannot read the directory of page 1")

json.dump(cases, open(os.path.join(out, "cases.json"), "w"), indent=1)
