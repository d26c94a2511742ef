"""Merges the sweeps of gang-vs-batch.sh into one CSV and draws mean slowdown against load
(log scale), one panel per workload, as SVG. Standard library only."""
import csv, json, math, os, sys

out_dir, doc_dir = sys.argv[1], sys.argv[2]
rows = []
for workload in ("lublin", "kth"):
    for quantum in ("10s", "600s"):
        with open(os.path.join(out_dir, f"{workload}-{quantum}", "sweep.json")) as f:
            for r in json.load(f):
                label = r["policy"] if r["policy"] != "gang" else f"gang {quantum}"
                rows.append(dict(workload=workload, policy=label, load=r["load"], seed=r["seed"],
                                 jobs=r["jobs"], unfinished=r["unfinished"],
                                 mean_slowdown=r["mean_slowdown"],
                                 mean_bounded_slowdown=r["mean_bounded_slowdown"],
                                 utilization=r["utilization"], error=r["error"] or ""))

# Mean over seeds.
agg = {}
for r in rows:
    k = (r["workload"], r["policy"], r["load"])
    agg.setdefault(k, []).append(r)
table = []
for (w, p, l), rs in sorted(agg.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
    n = len(rs)
    table.append(dict(workload=w, policy=p, load=l, seeds=n,
                      mean_slowdown=sum(r["mean_slowdown"] for r in rs) / n,
                      mean_bounded_slowdown=sum(r["mean_bounded_slowdown"] for r in rs) / n,
                      utilization=sum(r["utilization"] for r in rs) / n,
                      unfinished=sum(r["unfinished"] for r in rs)))
with open(os.path.join(doc_dir, "gang-vs-batch.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(table[0].keys()))
    w.writeheader()
    for t in table:
        w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in t.items()})

policies = ["fcfs", "easy", "prime", "gang 600s", "gang 10s"]
colours = {"fcfs": "#d62728", "easy": "#1f77b4", "prime": "#ff7f0e", "gang 600s": "#2ca02c", "gang 10s": "#9467bd"}
W, H, M = 460, 340, 60
ymin, ymax = 1, 1e5
def ypos(v):
    v = min(max(v, ymin), ymax)
    return M / 2 + (H - 1.5 * M) * (1 - (math.log10(v) - math.log10(ymin)) / (math.log10(ymax) - math.log10(ymin)))
def xpos(l):
    return M + (W - 1.3 * M) * (l - 0.1) / 0.9
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2*W}" height="{H+40}" font-family="sans-serif" font-size="12">',
       '<rect width="100%" height="100%" fill="white"/>']
for i, (wl, title) in enumerate((("lublin", "Lublin model, 128 nodes (3 seeds)"), ("kth", "KTH-SP2 trace, 100 nodes"))):
    ox = i * W
    svg.append(f'<g transform="translate({ox},0)">')
    svg.append(f'<text x="{W/2}" y="18" text-anchor="middle" font-weight="bold">{title}</text>')
    x0, x1, y0, y1 = xpos(0.1), xpos(1.0), ypos(ymax), ypos(ymin)
    svg.append(f'<rect x="{x0}" y="{y0}" width="{x1-x0}" height="{y1-y0}" fill="none" stroke="#333"/>')
    for e in range(0, 6):
        y = ypos(10 ** e)
        svg.append(f'<line x1="{x0}" x2="{x1}" y1="{y}" y2="{y}" stroke="#ddd"/>')
        svg.append(f'<text x="{x0-6}" y="{y+4}" text-anchor="end">1e{e}</text>')
    for l in (0.2, 0.4, 0.6, 0.8, 1.0):
        x = xpos(l)
        svg.append(f'<text x="{x}" y="{y1+16}" text-anchor="middle">{l:.1f}</text>')
    svg.append(f'<text x="{(x0+x1)/2}" y="{y1+32}" text-anchor="middle">offered load</text>')
    svg.append(f'<text x="14" y="{(y0+y1)/2}" transform="rotate(-90 14 {(y0+y1)/2})" text-anchor="middle">mean slowdown</text>')
    for j, p in enumerate(policies):
        pts = [(t["load"], t["mean_slowdown"]) for t in table if t["workload"] == wl and t["policy"] == p]
        pts.sort()
        if not pts:
            continue
        path = " ".join(f"{xpos(l):.1f},{ypos(v):.1f}" for l, v in pts)
        svg.append(f'<polyline points="{path}" fill="none" stroke="{colours[p]}" stroke-width="2"/>')
        for l, v in pts:
            svg.append(f'<circle cx="{xpos(l):.1f}" cy="{ypos(v):.1f}" r="3" fill="{colours[p]}"/>')
        svg.append(f'<rect x="{x0+10}" y="{y0+8+j*16}" width="12" height="3" fill="{colours[p]}"/>')
        svg.append(f'<text x="{x0+28}" y="{y0+14+j*16}">{p}</text>')
    svg.append('</g>')
svg.append('</svg>')
with open(os.path.join(doc_dir, "gang-vs-batch.svg"), "w") as f:
    f.write("\n".join(svg) + "\n")
for t in table:
    print(f'{t["workload"]:7} {t["policy"]:10} load {t["load"]:.2f}  slowdown {t["mean_slowdown"]:12.2f}  bsld {t["mean_bounded_slowdown"]:12.2f}  util {t["utilization"]:.3f}  unfinished {t["unfinished"]}')
