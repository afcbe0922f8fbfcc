"""The kernels of an Nsight Compute run (ncu --csv --page raw, one row per
launch) that take the most time: per kernel its share of the run, total
and per-launch time, compute (SM) and memory throughput and DRAM
throughput as percentages of the GPU's peaks, achieved occupancy and
registers, and for kiln's kernels the op each runs for (from
`kiln-compile --report-kernels`). A markdown table on stdout.

    python3 bench/ncu_summary.py NCU.csv [KERNELS.txt] [ROWS]
    python3 bench/ncu_summary.py --top-kiln N NCU.csv
    python3 bench/ncu_summary.py --details DETAILS.csv

The second form prints the names of the N kiln kernels that take the
most time, one a line, for ncu runs that profile each alone in detail;
the third, from such a run (ncu --csv --page raw, with sections), the
metrics that say why a kernel waits (stall reasons, issue activity, pipe
use, cache hit rates, bank conflicts), averaged over its launches.
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
    header, units, rows = raw_page(path)
    at = {name: i for i, name in enumerate(header)}
    scale = TO_MS.get(units[at[DURATION]].strip(), None)
    if scale is None:
        sys.exit(f"ncu_summary.py: unknown duration unit '{units[at[DURATION]]}'")
    for r in rows:
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


def top_kiln(ncu, count):
    total = defaultdict(float)
    for kernel, ms, _ in launches(ncu):
        if kernel.startswith("kiln_kernel_"):
            total[kernel] += ms
    for kernel in sorted(total, key=total.get, reverse=True)[:count]:
        print(kernel)


# What says why a kernel waits, among the raw metrics of ncu's sections:
# stall reasons per issued instruction, issue activity, pipe use, cache
# hit rates, shared memory bank conflicts, throughputs.
WHY = re.compile(r"stalled|issue_active|inst_issued|hit_rate|bank_conflict|"
                 r"pipe_.*active|throughput")


def raw_page(path):
    """The raw page's header (metric names), units and a row per launch."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(line for line in f if not line.startswith("=="))]
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if start is None:
        sys.exit(f"ncu_summary.py: no launches in {path}")
    header = rows[start]
    return header, rows[start + 1], [r for r in rows[start + 2:] if len(r) == len(header)]


def details(path):
    header, units, rows = raw_page(path)
    print("| metric | unit | mean over launches |\n|---|---|---|")
    for i, name in enumerate(header):
        values = [v for v in (number(r[i]) for r in rows) if v is not None]
        if WHY.search(name) and values:
            print(f"| {name} | {units[i]} | {sum(values) / len(values):.4g} |")


def main():
    if sys.argv[1] == "--top-kiln":
        return top_kiln(sys.argv[3], int(sys.argv[2]))
    if sys.argv[1] == "--details":
        return details(sys.argv[2])
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
