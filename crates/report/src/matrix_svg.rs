//! The Ousterhout matrix as an SVG picture (`cosched sim --matrix-out FILE.svg`).
//!
//! Two panels, drawn from a [`MatrixRecord`] that [`crate::timeshare_metrics::Observer`]
//! filled during a run: the matrix as it stood when the window opened (rows = slots, columns =
//! PEs, the active slot marked), and below it the rows of time — one row per interval in
//! which the same jobs ran, columns = PEs — as in Fig. 2.1 of seed 000, so alternate
//! scheduling shows as a job appearing outside its own slot's rows. One colour per job.

use std::fmt::Write;

use cosched_core::{JobId, PeSet};

use crate::timeshare_metrics::MatrixRecord;

const WIDTH: f64 = 960.0;
const LABEL: f64 = 150.0;
const ROW: f64 = 16.0;

/// A colour per job: hues spread by the golden ratio, so neighbours differ.
fn colour(job: JobId) -> String {
    let hue = (job.0 as f64 * 0.618_033_988_75).fract() * 360.0;
    let light = 45 + (job.0 % 3) * 10;
    format!("hsl({hue:.0},65%,{light}%)")
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One row of cells: each job's PE runs as rectangles, with the job id where it fits.
fn row(svg: &mut String, y: f64, pes: u32, jobs: &[(JobId, PeSet)], label: &str, highlight: bool) {
    let cell = (WIDTH - LABEL - 10.0) / pes.max(1) as f64;
    let weight = if highlight { "bold" } else { "normal" };
    let _ = writeln!(
        svg,
        r#"<text x="4" y="{:.1}" font-size="11" font-weight="{weight}">{}</text>"#,
        y + ROW - 4.0,
        escape(label)
    );
    let _ = writeln!(
        svg,
        r##"<rect x="{LABEL}" y="{y:.1}" width="{:.1}" height="{ROW}" fill="#f4f4f4" stroke="#ccc" stroke-width="0.5"/>"##,
        cell * pes as f64
    );
    for (job, set) in jobs {
        for &(s, e) in set.runs() {
            let x = LABEL + s as f64 * cell;
            let w = (e - s) as f64 * cell;
            let _ = writeln!(
                svg,
                r##"<rect x="{x:.2}" y="{y:.1}" width="{w:.2}" height="{ROW}" fill="{}" stroke="#333" stroke-width="0.4"><title>job {job} on PEs {set}</title></rect>"##,
                colour(*job)
            );
            let text = job.to_string();
            if w >= 7.0 * text.len() as f64 {
                let _ = writeln!(
                    svg,
                    r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="white">{text}</text>"#,
                    x + w / 2.0,
                    y + ROW - 4.0
                );
            }
        }
    }
}

/// Renders the record as a complete SVG document.
pub fn render(rec: &MatrixRecord, pes: u32, title: &str) -> String {
    let slots = rec.first.as_ref().map_or(0, |(_, m)| m.slots.len());
    let height = 60.0 + (slots as f64 + rec.intervals.len() as f64) * ROW + 70.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="sans-serif">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="4" y="16" font-size="14" font-weight="bold">{}</text>"#,
        escape(title)
    );
    let mut y = 30.0;
    match &rec.first {
        Some((t, m)) => {
            let _ = writeln!(
                svg,
                r#"<text x="4" y="{:.1}" font-size="12">Ousterhout matrix at t = {t} s: rows = slots, columns = PEs 0-{}</text>"#,
                y + 10.0,
                pes.saturating_sub(1)
            );
            y += 16.0;
            for (i, slot) in m.slots.iter().enumerate() {
                let active = m.active == Some(i as u32);
                let label = format!("{}slot {i}", if active { "▶ " } else { "" });
                row(&mut svg, y, pes, &slot.jobs, &label, active);
                y += ROW;
            }
        }
        None => {
            let _ = writeln!(
                svg,
                r#"<text x="4" y="{:.1}" font-size="12">no event in the window</text>"#,
                y + 10.0
            );
            y += 16.0;
        }
    }
    y += 14.0;
    let _ = writeln!(
        svg,
        r#"<text x="4" y="{:.1}" font-size="12">What ran, {} s to {} s: one row per interval with the same running jobs</text>"#,
        y, rec.from, rec.to
    );
    y += 6.0;
    for iv in &rec.intervals {
        let slot = iv
            .active
            .map_or("switch".to_string(), |a| format!("slot {a}"));
        let label = format!("{}-{} s {slot}", iv.from, iv.to);
        row(&mut svg, y, pes, &iv.running, &label, false);
        y += ROW;
    }
    if rec.dropped > 0 {
        let _ = writeln!(
            svg,
            r#"<text x="4" y="{:.1}" font-size="11">… {} more intervals not drawn (narrow the window)</text>"#,
            y + 14.0,
            rec.dropped
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeshare_metrics::Interval;
    use cosched_core::Time;
    use cosched_policy::{MatrixView, SlotView};

    #[test]
    fn draws_slots_and_intervals_with_job_colours() {
        let a = (JobId(1), PeSet::contiguous(0, 64));
        let b = (JobId(2), PeSet::contiguous(64, 32));
        let c = (JobId(3), PeSet::contiguous(0, 128));
        let m = MatrixView {
            slots: vec![
                SlotView {
                    jobs: vec![a.clone(), b.clone()],
                },
                SlotView {
                    jobs: vec![c.clone()],
                },
            ],
            active: Some(0),
        };
        let rec = MatrixRecord {
            from: Time::ZERO,
            to: Time::from_secs(20),
            first: Some((Time::ZERO, m)),
            intervals: vec![
                Interval {
                    from: Time::ZERO,
                    to: Time::from_secs(10),
                    active: Some(0),
                    running: vec![a, b],
                },
                Interval {
                    from: Time::from_secs(10),
                    to: Time::from_secs(20),
                    active: Some(1),
                    running: vec![c],
                },
            ],
            dropped: 0,
        };
        let svg = render(&rec, 128, "fig 4 & co");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("fig 4 &amp; co"));
        assert!(svg.contains("▶ slot 0") && svg.contains("slot 1"));
        assert!(svg.contains("10-20 s slot 1"));
        // Job 3 is drawn twice (matrix and interval), in one colour.
        let c3 = colour(JobId(3));
        assert_eq!(svg.matches(&format!("fill=\"{c3}\"")).count(), 2);
        assert_ne!(colour(JobId(1)), colour(JobId(2)));
        assert_eq!(svg.matches("job 1 on PEs 0-63").count(), 2);
    }
}
