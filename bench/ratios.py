"""Prints the benchmark results of one run (bench/run.sh) as a table: every
configuration's throughput, step time and memory, and each one's speed as a
ratio to torch.compile's (bf16 autocast, SDPA, fused AdamW) from the same
run."""
import json
import sys

# The torch.compile anchor of each model, by the anchors' configuration names.
BASELINE = {
    "gpt2": "bf16 AMP torch.compile, SDPA, fused AdamW",
    "bert": "bf16 AMP torch.compile, sdpa",
}


def model_of(entry):
    if "model" in entry:
        return "gpt2" if "gpt2" in entry["model"] else "bert"
    return "bert" if "samples_s" in entry else "gpt2"


rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
rows = [r for r in rows if "name" in r]
for model in ("gpt2", "bert"):
    mine = [r for r in rows if model_of(r) == model]
    if not mine:
        continue
    base = next((r for r in mine if r["name"] == BASELINE[model]), None)
    unit = "tok_s" if model == "gpt2" else "samples_s"
    print(f"\n### {model}: {unit} against `{BASELINE[model]}`\n")
    print(f"| configuration | B | {unit} | step ms | GPU GiB | vs torch.compile |")
    print("|---|---|---|---|---|---|")
    for r in mine:
        ratio = f"{r[unit] / base[unit]:.2f}x" if base else "n/a"
        memory = r.get("gpu_GiB", r.get("peak_GiB"))
        print(f"| {r['name']} | {r['B']} | {r[unit]} | {r['step_ms']} | {memory} | {ratio} |")
