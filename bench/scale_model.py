#!/usr/bin/python3
"""Images/s of a DINO run on N nodes, on paper: the step, the loader, the allreduce and the shared filesystem,
each from a measurement here or a published figure named beside it (docs/scale.md, "Scale on paper").

usage: bench/scale_model.py [--check STEP_S ALLREDUCE_S BATCH RANKS]

A step of P = nodes x GPUs ranks, batch b per rank:
  compute   b / S                                 S: one GPU's images/s at the model (not measured: see GPU_RATES)
  allreduce G * 2 (P - 1) / P / busbw             G: the student's gradient bytes; busbw: NCCL's bus bandwidth
  loader    b / (threads x L)                      L: the loader's images/s per thread (bench/loader.sh)
  step      max(compute + allreduce, loader)      the loader runs ahead on its own threads (Prefetcher)
  images/s  P x b / step, and read in place at most FSx's bytes/s / bytes per image
With --check, the model's form against a run measured here: the step time of one rank and the allreduce
time give the images/s of RANKS ranks, printed beside nothing else (the caller compares).
"""
import math
import sys

# DINO's vit_small/16 (facebookresearch/dino vision_transformer.py: embed 384, depth 12, mlp_ratio 4, qkv_bias)
# on the workshop's 5 channels at 224 px, and DINOHead(384, out_dim 65536, hidden 2048, bottleneck 256, 3
# layers, norm_last_layer: the weight-norm gain frozen): the parameters the optimiser updates.
def vit_small_dino_parameters(channels=5, image=224, patch=16, out_dim=65536):
    d, hidden = 384, 4 * 384
    patches = (image // patch) ** 2
    backbone = channels * patch * patch * d + d + d + (patches + 1) * d + d * 2
    block = 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d + (d * hidden + hidden) + (hidden * d + d)
    backbone += 12 * block
    head = (d * 2048 + 2048) + (2048 * 2048 + 2048) + (2048 * 256 + 256) + 256 * out_dim
    return backbone + head


GRADIENT_BYTES = 4 * vit_small_dino_parameters()  # float32 gradients, averaged over ranks each step
BATCH = 64  # sbatch/examples/workshop.yaml train_scDINO.batch_size_per_gpu

# Loader images/s per thread, 2 x 224 + 8 x 96-px crops (bench/RESULTS.md, "The training loader alone", 1 thread).
LOADER = {"cells (TIFF)": 404, "cells (packed)": 602, "JPEGs": 180}
# Bytes per image as stored: the workshop-shaped cells of bench/stages.sh 10000 (334,199,008 B / 10,000
# TIFFs), the same packed (bench/loader.sh's pack: 12,891,738 B / 512) and bench/make_jpegs.py's ~500x375
# JPEGs (36,841,427 B / 512).
BYTES = {"cells (TIFF)": 33420, "cells (packed)": 25180, "JPEGs": 71956}

# One GPU's images/s at the model: NOT MEASURED (the GPU issue measures it). The anchor is DINO's README:
# ViT-S/16, 100 ImageNet epochs of 1,281,167 images in 1.75 days on 8 GPUs = 106 images/s per GPU (Volta-era);
# 1,000 for an H100 is an assumption of 10x that anchor, and 50 for a T4 one of half of it (a T4's 65 dense
# FP16 tensor TFLOPS against a V100's 125, NVIDIA's data sheets).
DINO_ANCHOR = 1281167 * 100 / (1.75 * 86400) / 8

# Nodes: GPUs, cores per GPU (vCPUs / 2 / GPUs, cluster/src/catalogue.cpp), NCCL bus bandwidth across nodes
# in GB/s and its source, the shared filesystem of the site example and its read throughput in MB/s.
NODES = {
    "p5.48xlarge": dict(
        gpus=8, cores_per_gpu=12, gpu_rate=1000.0, busbw=250.0,
        busbw_source="ParallelCluster's EFA test floor (ami/src/compat.cpp nccl_busbw_threshold)",
        # cluster/examples/p5-efa.yaml: 9,600 GiB PERSISTENT_2 at 250 MB/s/TiB (FSx for Lustre user guide,
        # "Performance characteristics of SSD and HDD storage classes": disk throughput = the per-TiB figure)
        fsx_mb_s=9600 / 1024 * 250, sizes=(1, 2, 4, 16)),
    "g4dn.2xlarge": dict(
        gpus=1, cores_per_gpu=4, gpu_rate=50.0, busbw=25 / 8,
        busbw_source="its 25 Gbps network (catalogue), no EFA: an upper bound",
        # cluster/examples/workshop.yaml: 4,800 GiB PERSISTENT_1 at 200 MB/s/TiB
        fsx_mb_s=4800 / 1024 * 200, sizes=(1, 2, 4, 6)),
}


def allreduce_seconds(ranks, busbw_gb_s, nbytes=GRADIENT_BYTES):
    return 0.0 if ranks <= 1 else nbytes * 2 * (ranks - 1) / ranks / (busbw_gb_s * 1e9)


def row(node, n, data, gpu_rate):
    p = n * node["gpus"]
    compute = BATCH / gpu_rate
    ar = allreduce_seconds(p, node["busbw"])
    loader = BATCH / (node["cores_per_gpu"] * LOADER[data])
    step = max(compute + ar, loader)
    rate = p * BATCH / step
    fsx = node["fsx_mb_s"] * 1e6 / BYTES[data]
    return p, compute, ar, loader, rate, fsx


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--check":
        step, ar, batch, ranks = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        print(f"{ranks * batch / (step + ar):.1f}")
        return
    print(f"gradient: {vit_small_dino_parameters():,} parameters, {GRADIENT_BYTES / 1e6:.1f} MB float32; "
          f"batch {BATCH} per GPU; DINO's anchor {DINO_ANCHOR:.0f} images/s per GPU\n")
    for name, node in NODES.items():
        print(f"{name}: {node['gpus']} GPU(s) a node at {node['gpu_rate']:.0f} images/s each (assumed), "
              f"busbw {node['busbw']:.1f} GB/s ({node['busbw_source']}), FSx {node['fsx_mb_s']:.0f} MB/s\n")
        print("| nodes | data | step compute ms | allreduce ms | loader ms/batch | images/s staged | "
              "read in place: FSx allows | in place |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|")
        for n in node["sizes"]:
            for data in ("cells (packed)", "JPEGs"):
                p, compute, ar, loader, rate, fsx = row(node, n, data, node["gpu_rate"])
                print(f"| {n} | {data} | {compute * 1e3:.0f} | {ar * 1e3:.1f} | {loader * 1e3:.1f} | "
                      f"{rate:,.0f} | {fsx:,.0f} | {min(rate, fsx):,.0f} |")
        print()


if __name__ == "__main__":
    main()
