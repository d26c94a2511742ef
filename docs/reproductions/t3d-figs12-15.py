"""Tables (markdown, stdout) and figure (SVG) of seed 002 Figs. 12-15 from the --timeshare-out
documents t3d-figs12-15.sh writes: DIR/{day,day-night}-{1,2,3}.timeshare.json.
Usage: python3 t3d-figs12-15.py DIR OUT.svg"""

import json
import sys

SETS = [("day", "Table 1 all the time"), ("day-night", "day / night sets")]
SEEDS = [1, 2, 3]
# The seed's figures are images in the text we have; only the numbers its prose states are
# given here (§4.7-4.8).
PAPER = {
    "interactive_mean_slowdown": 7.94,
    "interactive_mean_bounded_slowdown": 2.27,
    "interactive_max_slowdown": 1371,
    "interactive_response_over_runtime": 1.18,
    "preempted_jobs_fraction": 0.075,
    "max_preemptions": 77,
}


def load(d, s, seed):
    with open(f"{d}/{s}-{seed}.timeshare.json") as f:
        return json.load(f)


def mean(v):
    return sum(v) / len(v)


def main():
    d, svg = sys.argv[1], sys.argv[2]
    runs = {s: [load(d, s, k) for k in SEEDS] for s, _ in SETS}
    print("| figure | quantity | seed 002 | " + " | ".join(t for _, t in SETS) + " |")
    print("|---|---|---|" + "---|" * len(SETS))
    rows = [
        ("12", "interactive mean slowdown", "interactive_mean_slowdown", "{:.2f}"),
        ("12", "interactive mean bounded slowdown (10 s)", "interactive_mean_bounded_slowdown", "{:.2f}"),
        ("12", "worst interactive slowdown", "interactive_max_slowdown", "{:.0f}"),
        ("§4.7", "total response / total runtime, interactive", "interactive_response_over_runtime", "{:.2f}"),
        ("13", "jobs preempted at least once", "preempted_jobs_fraction", "{:.1%}"),
        ("14", "most preemptions of one job", "max_preemptions", "{:.0f}"),
    ]
    for fig, name, key, fmt in rows:
        ours = [fmt.format(mean([r[key] for r in runs[s]])) for s, _ in SETS]
        print(f"| {fig} | {name} | {fmt.format(PAPER[key])} | " + " | ".join(ours) + " |")
    print()
    # Figs. 13 and 15 by size, Fig. 14 and Fig. 12's histograms: means over the seeds.
    sizes = [r["size"] for r in runs["day"][0]["by_size"]]
    print("| size (PEs) | jobs | preempted (Fig. 13) | mean quantum, preempted jobs (Fig. 15) | mean quantum, all jobs (Fig. 15) |")
    print("|---|---|---|---|---|")
    by = {}
    for s, _ in SETS:
        for size in sizes:
            rs = [x for r in runs[s] for x in r["by_size"] if x["size"] == size]
            by[(s, size)] = rs
    for size in sizes:
        rs = by[("day", size)]
        qp = [x["mean_quantum_preempted_s"] for x in rs if x["mean_quantum_preempted_s"]]
        qa = [x["mean_quantum_all_s"] for x in rs if x["mean_quantum_all_s"]]
        print(
            f"| {size} | {sum(x['jobs'] for x in rs)} | {mean([x['preempted_fraction'] for x in rs]):.1%} | "
            f"{mean(qp) if qp else float('nan'):.0f} s | {mean(qa) if qa else float('nan'):.0f} s |"
        )
    print()
    hists = {}
    for key in ["interactive_slowdown_hist", "interactive_bounded_slowdown_hist", "preemptions_hist"]:
        labels = [b["label"] for b in runs["day"][0][key]]
        hists[key] = (labels, [mean([r[key][i]["count"] for r in runs["day"]]) for i in range(len(labels))])
        print(f"{key} (Table 1, mean of 3 seeds): " + ", ".join(f"{l}: {c:.0f}" for l, c in zip(*hists[key])))
    draw(svg, hists, sizes, by)


def bars(x0, y0, w, h, title, labels, values, fmt, colour):
    out = [f'<text x="{x0 + w / 2}" y="{y0 - 8}" text-anchor="middle" font-size="13">{title}</text>']
    top = max(values) or 1
    bw = w / len(values)
    for i, (l, v) in enumerate(zip(labels, values)):
        bh = h * v / top
        x = x0 + i * bw
        out.append(f'<rect x="{x + 2:.1f}" y="{y0 + h - bh:.1f}" width="{bw - 4:.1f}" height="{bh:.1f}" fill="{colour}"/>')
        out.append(f'<text x="{x + bw / 2:.1f}" y="{y0 + h + 13}" text-anchor="middle" font-size="9">{l}</text>')
        out.append(f'<text x="{x + bw / 2:.1f}" y="{y0 + h - bh - 3:.1f}" text-anchor="middle" font-size="9">{fmt.format(v)}</text>')
    out.append(f'<line x1="{x0}" y1="{y0 + h}" x2="{x0 + w}" y2="{y0 + h}" stroke="black"/>')
    return out


def draw(path, hists, sizes, by):
    w, h = 420, 150
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="920" height="760" font-family="sans-serif">',
             '<rect width="100%" height="100%" fill="white"/>',
             '<text x="460" y="22" text-anchor="middle" font-size="15">t3d on the Lublin model, 256 PEs, load 0.75, 4,000 jobs, Table 1 (mean of seeds 1-3)</text>']
    l, v = hists["interactive_slowdown_hist"]
    parts += bars(40, 60, w, h, "Fig. 12: interactive slowdown (seed 002: mean 7.94)", l, v, "{:.0f}", "#4477aa")
    l, v = hists["interactive_bounded_slowdown_hist"]
    parts += bars(480, 60, w, h, "Fig. 12: interactive bounded slowdown (seed 002: mean 2.27)", l, v, "{:.0f}", "#66ccee")
    pre = [mean([x["preempted_fraction"] for x in by[("day", s)]]) * 100 for s in sizes]
    parts += bars(40, 300, w, h, "Fig. 13: % of jobs preempted, by size (seed 002: ~equal, 7.5 % overall)", sizes, pre, "{:.0f}", "#228833")
    l, v = hists["preemptions_hist"]
    parts += bars(480, 300, w, h, "Fig. 14: jobs by number of preemptions (seed 002: max 77)", l, v, "{:.0f}", "#ccbb44")
    qa = [mean([x["mean_quantum_all_s"] or 0 for x in by[("day", s)]]) for s in sizes]
    qp = [mean([x["mean_quantum_preempted_s"] or 0 for x in by[("day", s)]]) for s in sizes]
    parts += bars(40, 540, w, h, "Fig. 15: mean quantum (s), all jobs", sizes, qa, "{:.0f}", "#ee6677")
    parts += bars(480, 540, w, h, "Fig. 15: mean quantum (s), preempted jobs", sizes, qp, "{:.0f}", "#aa3377")
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


main()
