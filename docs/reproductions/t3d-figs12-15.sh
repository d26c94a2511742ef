#!/bin/sh
# Reproduces docs/reproductions/t3d-figs12-15.md: seed 002 Figs. 12-15 (the LLNL Cray T3D
# gang scheduler in operation) from the t3d policy on a Lublin-model workload for 256 PEs,
# with Table 1 all the time and with the day / night parameter sets. Writes one --json
# document per run under $OUT, then the tables (markdown, stdout) and the figure
# (t3d-figs12-15.svg, beside this script) with t3d-figs12-15.py.
# Usage: sh docs/reproductions/t3d-figs12-15.sh [path/to/cosched] > tables.md
set -eu
COSCHED=${1:-target/release/cosched}
OUT=${OUT:-target/t3d-figs12-15}
HERE=$(dirname "$0")
mkdir -p "$OUT"
printf '[policy.night]\n' > "$OUT/day-night.toml"
for seed in 1 2 3; do
    for set in day day-night; do
        cfg=""
        [ "$set" = day-night ] && cfg="--policy-config $OUT/day-night.toml"
        # shellcheck disable=SC2086
        "$COSCHED" sim --model lublin --procs 256 --jobs 4000 --load 0.75 --seed "$seed" \
            --policy t3d $cfg --json --timeshare-out "$OUT/$set-$seed.timeshare.json" \
            > "$OUT/$set-$seed.json"
    done
done
python3 "$HERE/t3d-figs12-15.py" "$OUT" "$HERE/t3d-figs12-15.svg"
