#!/usr/bin/python3
"""usage: compare_mean_std.py TOLERANCE EXPECTED.json ACTUAL.json...: exit 1 unless every ACTUAL's mean
and std lists match EXPECTED's within TOLERANCE (absolute); prints the largest difference."""
import json
import sys

tol = float(sys.argv[1])
expected = json.load(open(sys.argv[2]))
worst = 0.0
for path in sys.argv[3:]:
    got = json.load(open(path))
    for key in ("mean", "std"):
        if len(got[key]) != len(expected[key]):
            sys.exit(f"{path}: {key} has {len(got[key])} values, expected {len(expected[key])}")
        worst = max([worst] + [abs(a - b) for a, b in zip(got[key], expected[key])])
print(f"largest difference {worst:.3g} (tolerance {tol:g})")
sys.exit(0 if worst <= tol else 1)
