#!/usr/bin/env python3
"""Plots `capfleet-bench clock`'s samples: each frame's fleet-time error over time, per
device, with its reported bound, the clean and impaired phases shaded apart.

    plot-clock-accuracy.py SAMPLES.csv OUT.png     (needs matplotlib: apt install python3-matplotlib)
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(samples_path, png_path):
    rows = list(csv.DictReader(open(samples_path)))
    if not rows:
        sys.exit(f"{samples_path} holds no samples")
    devices = sorted({row["device"] for row in rows})
    figure, (errors, bounds) = plt.subplots(2, 1, figsize=(12, 8), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    for device in devices:
        mine = [row for row in rows if row["device"] == device]
        seconds = [float(row["seconds"]) for row in mine]
        errors.plot(seconds, [float(row["error_ns"]) / 1e3 for row in mine], ".", markersize=2, label=device)
        bounds.plot(seconds, [float(row["uncertainty_ns"]) / 1e3 for row in mine], "-", linewidth=0.8, label=device)
    impaired = [float(row["seconds"]) for row in rows if row["phase"] == "impaired"]
    for axis in (errors, bounds):
        if impaired:
            axis.axvspan(min(impaired), max(impaired), color="orange", alpha=0.12, label="5% loss + 20 ms spikes")
        axis.grid(True, alpha=0.3)
    for limit in (10, -10):
        errors.axhline(limit, color="green", linewidth=0.6, linestyle="--")
    for limit in (50, -50):
        errors.axhline(limit, color="red", linewidth=0.6, linestyle="--")
    errors.set_ylim(-120, 120)
    errors.set_ylabel("fleet-time error (µs)\n(--: 10 µs median, 50 µs p99 targets)")
    errors.set_title("capfleet-bench clock: frames' fleet time minus true capture time")
    errors.legend(loc="upper right", markerscale=5, fontsize=8)
    bounds.set_yscale("log")
    bounds.set_ylabel("reported bound (µs)")
    bounds.set_xlabel("seconds since measuring began")
    figure.tight_layout()
    figure.savefig(png_path, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
