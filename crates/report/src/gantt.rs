//! Gantt charts of a schedule: jobs as rectangles over PEs (y) and time (x), with the
//! machine's utilization and the queue length over the same time below, as SVG or PNG
//! (`cosched sim --gantt-out`, and `cosched acct --gantt-out` for a real run).
//!
//! A job is drawn from its start to its end over the PEs it held, one rectangle per
//! contiguous run of PEs: a job spread over non-contiguous PEs is several rectangles.
//! Time-shared jobs (those that spent time suspended: gang scheduling, preemption) are drawn
//! translucent and hatched over their whole residency, so the jobs that share PEs in
//! different slots of the Ousterhout matrix show as overlapping hatched rectangles; which
//! slot ran when is in `--matrix-out`. A job that was preempted and restarted elsewhere is
//! drawn on the PEs it held last. The utilization panel counts PEs held by started,
//! unfinished jobs over the machine's PEs: under time-sharing it can pass 1 (up to the
//! multiprogramming level).
//!
//! Built on [`crate::plot`]: the same fonts, palette, sizes and provenance.

use std::ops::Range;
use std::path::Path;

use plotters::prelude::*;

use crate::plot::{FONT, Figure, PALETTE, PlotError, render};
use crate::provenance::Provenance;

/// One job of a schedule, times in seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct GanttJob {
    pub id: u64,
    pub submit: f64,
    pub start: Option<f64>,
    pub end: Option<f64>,
    /// Half-open runs `[a, b)` of PE indices.
    pub pes: Vec<(u32, u32)>,
    /// Drawn hatched and translucent (it shared its PEs in time).
    pub time_shared: bool,
}

/// A schedule to draw.
#[derive(Clone, Debug, Default)]
pub struct Gantt {
    pub title: String,
    pub pes: u32,
    pub jobs: Vec<GanttJob>,
    /// The time window drawn (seconds); `None`: from the first submit to the last end.
    pub window: Option<Range<f64>>,
    pub provenance: Option<Provenance>,
}

/// The figure's size in CSS pixels: taller than a line chart, for the three panels.
pub const GANTT_SIZE: (u32, u32) = (800, 560);

impl Gantt {
    /// The pieces drawn: `(job index, t0, t1, pe0, pe1)`, clipped to the window.
    pub fn pieces(&self) -> Vec<(usize, f64, f64, u32, u32)> {
        let w = self.range();
        let mut out = Vec::new();
        for (k, j) in self.jobs.iter().enumerate() {
            let (Some(s), Some(e)) = (j.start, j.end.or(Some(w.end))) else {
                continue;
            };
            let (a, b) = (s.max(w.start), e.min(w.end));
            if b <= a {
                continue;
            }
            for &(p0, p1) in &j.pes {
                out.push((k, a, b, p0, p1));
            }
        }
        out
    }

    /// The window: given, or the whole schedule.
    pub fn range(&self) -> Range<f64> {
        if let Some(w) = &self.window {
            return w.clone();
        }
        let lo = self.jobs.iter().map(|j| j.submit).fold(f64::MAX, f64::min);
        let hi = self
            .jobs
            .iter()
            .map(|j| j.end.or(j.start).unwrap_or(j.submit))
            .fold(f64::MIN, f64::max);
        if lo > hi {
            0.0..1.0
        } else if hi <= lo {
            lo..lo + 1.0
        } else {
            lo..hi
        }
    }

    /// Utilization and queue length as step functions over the window: `(t, util, queue)`
    /// at every change.
    pub fn steps(&self) -> Vec<(f64, f64, f64)> {
        let w = self.range();
        // (time, Δheld PEs, Δqueued jobs)
        let mut ev: Vec<(f64, i64, i64)> = Vec::new();
        for j in &self.jobs {
            let held: i64 = j.pes.iter().map(|&(a, b)| i64::from(b - a)).sum();
            ev.push((j.submit, 0, 1));
            if let Some(s) = j.start {
                ev.push((s, held, -1));
                if let Some(e) = j.end {
                    ev.push((e, -held, 0));
                }
            }
        }
        ev.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut held, mut queued) = (0i64, 0i64);
        let mut out = vec![];
        let pes = f64::from(self.pes.max(1));
        let mut i = 0;
        while i < ev.len() {
            let t = ev[i].0;
            while i < ev.len() && ev[i].0 == t {
                held += ev[i].1;
                queued += ev[i].2;
                i += 1;
            }
            let point = (t.max(w.start), held as f64 / pes, queued as f64);
            if t <= w.start {
                // Only the state at the window's start matters from before it.
                out.clear();
                out.push(point);
            } else if t < w.end {
                out.push(point);
            }
        }
        if out.is_empty() {
            out.push((w.start, 0.0, 0.0));
        }
        out
    }
}

/// Seconds in the unit the time axis is labelled in, and its name.
fn time_unit(span: f64) -> (f64, &'static str) {
    if span > 4.0 * 86_400.0 {
        (86_400.0, "d")
    } else if span > 4.0 * 3600.0 {
        (3600.0, "h")
    } else if span > 600.0 {
        (60.0, "min")
    } else {
        (1.0, "s")
    }
}

/// Draws `g` to `path` (`.svg` or `.png` at 300 dpi).
pub fn gantt(path: &Path, g: &Gantt) -> Result<(), PlotError> {
    if g.jobs.is_empty() {
        return Err(PlotError::Empty);
    }
    render(path, GANTT_SIZE, g, g.provenance.as_ref())
}

impl Figure for Gantt {
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, plotters::coord::Shift>,
        s: f64,
    ) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
        let px = |v: f64| (v * s).round() as i32;
        let pxu = |v: f64| (v * s).round().max(1.0) as u32;
        root.fill(&WHITE).map_err(e)?;
        let w = self.range();
        let (unit, unit_name) = time_unit(w.end - w.start);
        let (x0, x1) = (w.start / unit, w.end / unit);
        let (_, h) = root.dim_in_pixel();
        let (top, bottom) = root.split_vertically((f64::from(h) * 0.6) as u32);
        let (mid, low) = bottom.split_vertically((f64::from(h) * 0.2) as u32);
        let pes = f64::from(self.pes.max(1));
        let label_style = (FONT, 11.0 * s);
        let desc_style = (FONT, 12.0 * s);
        let ylab = px(58.0);

        // Jobs over PEs and time. PE 0 at the top, as in the matrix drawings.
        let mut c = ChartBuilder::on(&top)
            .caption(&self.title, (FONT, 15.0 * s))
            .margin(px(10.0))
            .x_label_area_size(px(8.0))
            .y_label_area_size(ylab)
            .build_cartesian_2d(x0..x1, pes..0.0)
            .map_err(e)?;
        c.configure_mesh()
            .disable_x_mesh()
            .disable_y_mesh()
            .x_labels(0)
            .y_desc("PE")
            .y_label_formatter(&|v: &f64| format!("{}", v.round()))
            .label_style(label_style)
            .axis_desc_style(desc_style)
            .axis_style(BLACK.stroke_width(pxu(0.8)))
            .draw()
            .map_err(e)?;
        let pieces = self.pieces();
        let color = |k: usize| PALETTE[(self.jobs[k].id as usize) % (PALETTE.len() - 1)];
        // Solid jobs: one rectangle per contiguous PE run (fill, then a thin outline).
        c.draw_series(pieces.iter().filter(|p| !self.jobs[p.0].time_shared).map(
            |&(k, a, b, p0, p1)| {
                Rectangle::new(
                    [(a / unit, f64::from(p0)), (b / unit, f64::from(p1))],
                    color(k).mix(0.8).filled(),
                )
            },
        ))
        .map_err(e)?;
        // Time-shared jobs: translucent, hatched with diagonal lines clipped to the piece.
        c.draw_series(pieces.iter().filter(|p| self.jobs[p.0].time_shared).map(
            |&(k, a, b, p0, p1)| {
                Rectangle::new(
                    [(a / unit, f64::from(p0)), (b / unit, f64::from(p1))],
                    color(k).mix(0.35).filled(),
                )
            },
        ))
        .map_err(e)?;
        let hatch_style = BLACK.mix(0.35).stroke_width(pxu(0.5));
        for &(_, a, b, p0, p1) in pieces.iter().filter(|p| self.jobs[p.0].time_shared) {
            let (ul, br) = (
                c.backend_coord(&(a / unit, f64::from(p0))),
                c.backend_coord(&(b / unit, f64::from(p1))),
            );
            let step = px(6.0).max(2);
            let (wdt, hgt) = (br.0 - ul.0, br.1 - ul.1);
            let mut d = step;
            while d < wdt + hgt {
                // The line x + y = d inside the rectangle, in pixels from its corner.
                let (sx, sy) = (d.min(wdt), d - d.min(wdt));
                let (ex, ey) = (d - d.min(hgt), d.min(hgt));
                root.draw(&PathElement::new(
                    vec![(ul.0 + sx, ul.1 + sy), (ul.0 + ex, ul.1 + ey)],
                    hatch_style,
                ))
                .map_err(e)?;
                d += step;
            }
        }
        c.draw_series(pieces.iter().map(|&(_, a, b, p0, p1)| {
            Rectangle::new(
                [(a / unit, f64::from(p0)), (b / unit, f64::from(p1))],
                BLACK.mix(0.5).stroke_width(pxu(0.4)),
            )
        }))
        .map_err(e)?;

        let steps = self.steps();
        let step_line = |f: &dyn Fn(&(f64, f64, f64)) -> f64| -> Vec<(f64, f64)> {
            let mut v = Vec::with_capacity(steps.len() * 2 + 1);
            for (i, p) in steps.iter().enumerate() {
                if i > 0 {
                    v.push((p.0 / unit, f(&steps[i - 1])));
                }
                v.push((p.0 / unit, f(p)));
            }
            if let Some(last) = steps.last() {
                v.push((x1, f(last)));
            }
            v
        };
        // Utilization.
        let util = step_line(&|p| p.1);
        let umax = util.iter().map(|p| p.1).fold(1.0f64, f64::max) * 1.05;
        let mut c = ChartBuilder::on(&mid)
            .margin_left(px(10.0))
            .margin_right(px(10.0))
            .x_label_area_size(px(4.0))
            .y_label_area_size(ylab)
            .build_cartesian_2d(x0..x1, 0.0..umax)
            .map_err(e)?;
        c.configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(3)
            // Under time-sharing PEs are held by several jobs at once: not a utilization.
            .y_desc(if self.jobs.iter().any(|j| j.time_shared) {
                "held/PEs"
            } else {
                "utilization"
            })
            .label_style(label_style)
            .axis_desc_style(desc_style)
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.1).stroke_width(pxu(0.5)))
            .axis_style(BLACK.stroke_width(pxu(0.8)))
            .draw()
            .map_err(e)?;
        c.draw_series(
            AreaSeries::new(util, 0.0, PALETTE[0].mix(0.3))
                .border_style(PALETTE[0].stroke_width(pxu(1.0))),
        )
        .map_err(e)?;
        // Queue length.
        let queue = step_line(&|p| p.2);
        let qmax = queue.iter().map(|p| p.1).fold(2.0f64, f64::max).ceil() * 1.1;
        let mut c = ChartBuilder::on(&low)
            .margin_left(px(10.0))
            .margin_right(px(10.0))
            .margin_bottom(px(6.0))
            .x_label_area_size(px(34.0))
            .y_label_area_size(ylab)
            .build_cartesian_2d(x0..x1, 0.0..qmax)
            .map_err(e)?;
        c.configure_mesh()
            .disable_x_mesh()
            .y_labels(3)
            .x_desc(format!("time ({unit_name})"))
            .y_desc("queued")
            .label_style(label_style)
            .axis_desc_style(desc_style)
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.1).stroke_width(pxu(0.5)))
            .axis_style(BLACK.stroke_width(pxu(0.8)))
            // Whole jobs only: a tick between two integers is left blank.
            .y_label_formatter(&|v: &f64| {
                if (v - v.round()).abs() < 1e-6 {
                    format!("{}", v.round())
                } else {
                    String::new()
                }
            })
            .draw()
            .map_err(e)?;
        c.draw_series(
            AreaSeries::new(queue, 0.0, PALETTE[1].mix(0.3))
                .border_style(PALETTE[1].stroke_width(pxu(1.0))),
        )
        .map_err(e)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u64, submit: f64, start: f64, end: f64, pes: Vec<(u32, u32)>) -> GanttJob {
        GanttJob {
            id,
            submit,
            start: Some(start),
            end: Some(end),
            pes,
            time_shared: false,
        }
    }

    #[test]
    fn steps_and_pieces_of_a_tiny_schedule() {
        let g = Gantt {
            title: "t".into(),
            pes: 4,
            jobs: vec![
                job(1, 0.0, 0.0, 10.0, vec![(0, 2)]),
                job(2, 1.0, 10.0, 20.0, vec![(0, 1), (3, 4)]),
                job(3, 2.0, 2.0, 5.0, vec![(2, 3)]),
            ],
            window: None,
            provenance: None,
        };
        assert_eq!(g.range(), 0.0..20.0);
        assert_eq!(g.pieces().len(), 4);
        assert_eq!(
            g.steps(),
            vec![
                (0.0, 0.5, 0.0),
                (1.0, 0.5, 1.0),
                (2.0, 0.75, 1.0),
                (5.0, 0.5, 1.0),
                (10.0, 0.5, 0.0),
            ]
        );
        let w = Gantt {
            window: Some(3.0..12.0),
            ..g
        };
        // Job 3 and job 1 clipped, job 2's two pieces.
        assert_eq!(w.pieces().len(), 4);
        assert_eq!(w.pieces()[0], (0, 3.0, 10.0, 0, 2));
        assert_eq!(w.steps()[0], (3.0, 0.75, 1.0));
    }
}
