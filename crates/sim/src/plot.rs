//! Line charts as PNG or SVG (chosen by the file's extension), for sweeps and reproductions.
//!
//! Drawn with plotters and an embedded font (Hack, from `epaint_default_fonts`), so nothing
//! is needed from the system at build or run time. Reusable: give [`line_chart`] any series.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;

/// One line: a name for the legend and its points (x ascending); optional error bars
/// (half-widths, same length as `points`). With `markers_only` the points are drawn as a
/// scatter, unjoined and in any order (`cosched compare`'s start-against-start plot).
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub error: Option<Vec<f64>>,
    pub markers_only: bool,
}

/// A chart of lines.
#[derive(Clone, Debug, Default)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Logarithmic y axis (slowdowns span orders of magnitude near saturation).
    pub log_y: bool,
    pub series: Vec<Series>,
}

/// A chart could not be drawn or written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("{path}: unknown image type (use .png or .svg)")]
    Extension { path: String },
    #[error("{path}: {why}")]
    Draw { path: String, why: String },
    #[error("nothing to plot: no series has a finite, positive point")]
    Empty,
}

const FONT: &str = "sans-serif";
static FONT_ONCE: Once = Once::new();

fn register_font() {
    FONT_ONCE.call_once(|| {
        // The bytes are a valid TrueType font shipped in the crate; failure would be a bug there.
        let _ = plotters::style::register_font(
            FONT,
            FontStyle::Normal,
            epaint_default_fonts::HACK_REGULAR,
        );
    });
}

/// Draws `chart` to `path` (`.png`, 1024×640, or `.svg`).
pub fn line_chart(path: &Path, chart: &LineChart) -> Result<(), PlotError> {
    register_font();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let size = (1024, 640);
    let shown = path.display().to_string();
    let draw_err = |e: String| PlotError::Draw {
        path: shown.clone(),
        why: e,
    };
    match ext.as_str() {
        "png" => {
            let root = BitMapBackend::new(path, size).into_drawing_area();
            draw(&root, chart).map_err(draw_err)?;
            root.present().map_err(|e| draw_err(e.to_string()))
        }
        "svg" => {
            let root = SVGBackend::new(path, size).into_drawing_area();
            draw(&root, chart).map_err(draw_err)?;
            root.present().map_err(|e| draw_err(e.to_string()))
        }
        _ => Err(PlotError::Extension { path: shown }),
    }
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &LineChart,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let pts = || {
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| p.0.is_finite() && p.1.is_finite())
    };
    let (mut x0, mut x1) = pts().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (mut y0, mut y1) = pts()
        .filter(|p| !chart.log_y || p.1 > 0.0)
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    if x0 > x1 || y0 > y1 {
        return Err(PlotError::Empty.to_string());
    }
    if x0 == x1 {
        (x0, x1) = (x0 - 0.5, x1 + 0.5);
    }
    if chart.log_y {
        (y0, y1) = (y0 / 1.5, y1 * 1.5);
    } else {
        let pad = ((y1 - y0) * 0.05).max(1e-9);
        (y0, y1) = (if y0 >= 0.0 { 0.0 } else { y0 - pad }, y1 + pad);
    }
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(&chart.title, (FONT, 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70);
    let colors = [
        &BLUE,
        &RED,
        &GREEN,
        &MAGENTA,
        &CYAN,
        &BLACK,
        &RGBColor(230, 140, 0),
        &RGBColor(120, 70, 20),
    ];
    macro_rules! body {
        ($ctx:expr) => {{
            let mut ctx = $ctx;
            ctx.configure_mesh()
                .x_desc(chart.x_label.as_str())
                .y_desc(chart.y_label.as_str())
                .label_style((FONT, 14))
                .axis_desc_style((FONT, 16))
                .draw()
                .map_err(e)?;
            for (k, s) in chart.series.iter().enumerate() {
                let color = colors[k % colors.len()];
                let ok: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|p| p.0.is_finite() && p.1.is_finite() && (!chart.log_y || p.1 > 0.0))
                    .collect();
                // A scatter draws an empty line only to carry the legend entry.
                let line = if s.markers_only {
                    Vec::new()
                } else {
                    ok.clone()
                };
                ctx.draw_series(LineSeries::new(line, color.stroke_width(2)))
                    .map_err(e)?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                ctx.draw_series(ok.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(e)?;
                if let Some(err) = &s.error {
                    let bars = s.points.iter().zip(err).filter(|(p, h)| {
                        p.1.is_finite() && h.is_finite() && (!chart.log_y || p.1 - **h > 0.0)
                    });
                    ctx.draw_series(bars.map(|(&(x, y), &h)| {
                        PathElement::new(vec![(x, y - h), (x, y + h)], color.stroke_width(1))
                    }))
                    .map_err(e)?;
                }
            }
            ctx.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font((FONT, 14))
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(e)?;
        }};
    }
    if chart.log_y {
        body!(
            builder
                .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
                .map_err(e)?
        );
    } else {
        body!(builder.build_cartesian_2d(x0..x1, y0..y1).map_err(e)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_png_and_svg() {
        let dir = std::env::temp_dir().join(format!("cosched-sim-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let chart = LineChart {
            title: "test".into(),
            x_label: "load".into(),
            y_label: "bounded slowdown".into(),
            log_y: true,
            series: vec![
                Series {
                    name: "a".into(),
                    points: vec![(0.5, 1.0), (0.7, 3.0), (0.9, 40.0)],
                    error: Some(vec![0.1, 0.5, 5.0]),
                    markers_only: false,
                },
                Series {
                    name: "b".into(),
                    points: vec![(0.5, 1.0), (0.7, 2.0)],
                    error: None,
                    markers_only: true,
                },
            ],
        };
        line_chart(&dir.join("c.png"), &chart).unwrap();
        line_chart(&dir.join("c.svg"), &chart).unwrap();
        let png = std::fs::read(dir.join("c.png")).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let svg = std::fs::read_to_string(dir.join("c.svg")).unwrap();
        assert!(svg.contains("<svg") && svg.contains("bounded slowdown"));
        assert!(matches!(
            line_chart(&dir.join("c.gif"), &chart),
            Err(PlotError::Extension { .. })
        ));
        let empty = LineChart {
            series: vec![],
            ..chart
        };
        assert!(line_chart(&dir.join("e.svg"), &empty).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
