"""The kernels of an Nsight Compute run (ncu --csv --page raw, one row per
launch) that take the most time: per kernel its share of the run, total
and per-launch time, compute (SM) and memory throughput and DRAM
throughput as percentages of the GPU's peaks, achieved occupancy and
registers, and for kiln's kernels the op each runs for (from
`kiln-compile --report-kernels`). A markdown table on stdout.

    python3 bench/ncu_summary.py NCU.csv [KERNELS.txt] [ROWS]
"""
import csv
import re
import sys
from collections import defaultdict

COLUMNS = {  # ncu metric -> the table's column
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM %",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory %",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM %",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy %",
    "launch__registers_per_thread": "registers",
}
DURATION = "gpu__time_duration.sum"
TO_MS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3,
         "msecond": 1.0, "ms": 1.0, "second": 1e3, "s": 1e3}


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def launches(path):
    """Each launch's kernel name, duration in ms and metrics, from the raw
    page: a header row, a row of units, then a row per launch (ncu's own
    messages, lines starting with ==, skipped)."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(line for line in f if not line.startswith("=="))]
    start = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    header, units = rows[start], rows[start + 1]
    at = {name: i for i, name in enumerate(header)}
    scale = TO_MS.get(units[at[DURATION]].strip(), None)
    if scale is None:
        sys.exit(f"ncu_summary.py: unknown duration unit '{units[at[DURATION]]}'")
    for r in rows[start + 2:]:
        if len(r) != len(header):
            continue
        ms = number(r[at[DURATION]])
        if ms is None:
            continue
        yield r[at["Kernel Name"]], ms * scale, {
            column: number(r[at[metric]]) for metric, column in COLUMNS.items()
            if metric in at}


def origins(path):
    """kiln's kernels and the op each runs for, from --report-kernels."""
    found = {}
    for line in open(path):
        m = re.match(r"\s+(kiln_kernel_\d+)\s.*\s\d+x (.*)$", line)
        if m:
            found.setdefault(m.group(1), m.group(2))
    return found


def main():
    ncu = sys.argv[1]
    ops = origins(sys.argv[2]) if len(sys.argv) > 2 else {}
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    total, count, metrics = defaultdict(float), defaultdict(int), defaultdict(list)
    for kernel, ms, values in launches(ncu):
        total[kernel] += ms
        count[kernel] += 1
        metrics[kernel].append((ms, values))
    run = sum(total.values())
    print(f"{sum(count.values())} launches, {run:.3f} ms in all\n")
    print("| share | ms | launches | ms each | " + " | ".join(COLUMNS.values()) +
          " | kernel |")
    print("|---" * (5 + len(COLUMNS)) + "|")
    for kernel in sorted(total, key=total.get, reverse=True)[:rows]:
        cells = []
        for column in COLUMNS.values():
            # Weighted by each launch's time: what the kernel's time sees.
            pairs = [(ms, v[column]) for ms, v in metrics[kernel]
                     if v.get(column) is not None]
            weight = sum(ms for ms, _ in pairs)
            cells.append(f"{sum(ms * x for ms, x in pairs) / weight:.0f}"
                         if weight else "-")
        name = kernel if len(kernel) <= 60 else kernel[:57] + "..."
        if kernel in ops:
            name += f" ({ops[kernel]})"
        print(f"| {100 * total[kernel] / run:.1f}% | {total[kernel]:.3f} | "
              f"{count[kernel]} | {total[kernel] / count[kernel]:.4f} | " +
              " | ".join(cells) + f" | {name} |")


main()
