//! Line charts for papers, as PNG or SVG (chosen by the file's extension), for sweeps and
//! reproductions.
//!
//! What a figure in a paper needs, and how this gets it:
//! - **Fonts**: one embedded font (Hack, from `epaint_default_fonts`) draws the PNG and is
//!   embedded in the SVG as an `@font-face` data URL, so both look the same and neither
//!   depends on the fonts of the machine that renders it.
//! - **Resolution**: the SVG is 640×400 (CSS pixels, 96 per inch: 6.7×4.2 in); the PNG is the
//!   same drawing at 300 dpi (2000×1250 px, every size scaled by 300/96) with a `pHYs` chunk
//!   saying so.
//! - **Series told apart without colour**: the Okabe–Ito palette (safe for the common colour
//!   blindnesses) and, per series, its own marker and dash pattern, so a greyscale print
//!   still separates them.
//! - **Log axes**: decades only, labelled 10ᵏ.
//! - **Error bars**: said in the chart's `note`, printed under the plot (e.g. "bars: 90 % CI
//!   over 3 seeds").
//! - **Provenance**: cosched's version, command line and input hash, as SVG `<metadata>` and
//!   `<desc>`, and PNG `tEXt` chunks (see [`crate::provenance`]).

use std::path::Path;
use std::sync::Once;

use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::provenance::{Provenance, png_with_text, svg_insert_after_open};

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
    /// A line printed under the plot: what the error bars are, and anything else a caption
    /// must say. Empty: none.
    pub note: String,
    /// Carried in the file's metadata when given.
    pub provenance: Option<Provenance>,
    /// Names for the x values 1, 2, … (categories side by side, e.g. schedulers); empty: x is
    /// a number and labelled as one.
    pub x_names: Vec<String>,
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

/// The family name the embedded font is registered under, and named by in SVG.
pub const FONT: &str = "Hack";
static FONT_ONCE: Once = Once::new();

/// Registers the embedded font with plotters (once per process).
pub fn register_font() {
    FONT_ONCE.call_once(|| {
        // The bytes are a valid TrueType font shipped in the crate; failure would be a bug there.
        let _ = plotters::style::register_font(
            FONT,
            FontStyle::Normal,
            epaint_default_fonts::HACK_REGULAR,
        );
    });
}

/// The size of a figure in CSS pixels (the SVG's size).
pub const SIZE: (u32, u32) = (640, 400);
/// The PNG's resolution.
pub const PNG_DPI: u32 = 300;

/// Okabe & Ito's colour-blind-safe palette (2008), yellow last: it is faint on white.
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0x00, 0x72, 0xB2), // blue
    RGBColor(0xD5, 0x5E, 0x00), // vermillion
    RGBColor(0x00, 0x9E, 0x73), // bluish green
    RGBColor(0xCC, 0x79, 0xA7), // reddish purple
    RGBColor(0xE6, 0x9F, 0x00), // orange
    RGBColor(0x56, 0xB4, 0xE9), // sky blue
    RGBColor(0x00, 0x00, 0x00), // black
    RGBColor(0xF0, 0xE4, 0x42), // yellow
];

/// Dash patterns (dash, gap) in CSS pixels, one per series; the first is solid.
const DASHES: [(f64, f64); 8] = [
    (0.0, 0.0),
    (7.0, 4.0),
    (2.0, 3.0),
    (14.0, 4.0),
    (4.0, 2.0),
    (10.0, 8.0),
    (1.0, 5.0),
    (20.0, 3.0),
];

/// A marker's outline: a polygon of unit radius.
type Marker = Vec<(f64, f64)>;

/// Markers, one per series: a polygon (unit radius) and whether it is filled.
fn marker(k: usize) -> (Marker, bool) {
    let circle: Vec<(f64, f64)> = (0..16)
        .map(|i| {
            let a = i as f64 * std::f64::consts::TAU / 16.0;
            (a.cos(), a.sin())
        })
        .collect();
    let square = vec![(-0.85, -0.85), (0.85, -0.85), (0.85, 0.85), (-0.85, 0.85)];
    let triangle = vec![(0.0, -1.1), (1.0, 0.75), (-1.0, 0.75)];
    let diamond = vec![(0.0, -1.2), (1.0, 0.0), (0.0, 1.2), (-1.0, 0.0)];
    let down = vec![(0.0, 1.1), (1.0, -0.75), (-1.0, -0.75)];
    match k % 8 {
        0 => (circle, true),
        1 => (square, true),
        2 => (triangle, true),
        3 => (diamond, true),
        4 => (circle, false),
        5 => (square, false),
        6 => (down, true),
        _ => (diamond, false),
    }
}

/// Series `k`'s colour, dash pattern and marker. Past the eighth series the marker and dash
/// shift against the colour, so no two of the first 64 series look alike.
fn series_style(k: usize) -> (RGBColor, (f64, f64), Marker, bool) {
    let round = k / 8;
    let (shape, filled) = marker(k + round);
    (
        PALETTE[k % PALETTE.len()],
        DASHES[(k + 2 * round) % DASHES.len()],
        shape,
        filled,
    )
}

/// Unicode superscript digits for 10ᵏ labels.
fn superscript(k: i32) -> String {
    const SUP: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
    let mut s = String::new();
    if k < 0 {
        s.push('⁻');
    }
    for d in k.unsigned_abs().to_string().bytes() {
        s.push(SUP[(d - b'0') as usize]);
    }
    s
}

/// The label of a log-axis tick: `10ᵏ` at a power of ten, nothing elsewhere.
pub fn decade_label(v: f64) -> String {
    if v.is_nan() || v <= 0.0 {
        return String::new();
    }
    let k = v.log10();
    if (k - k.round()).abs() < 1e-6 {
        format!("10{}", superscript(k.round() as i32))
    } else {
        String::new()
    }
}

/// Draws `chart` to `path` (`.png` at 300 dpi, or `.svg`), with its provenance if it has one.
pub fn line_chart(path: &Path, chart: &LineChart) -> Result<(), PlotError> {
    render(path, SIZE, chart, chart.provenance.as_ref())
}

/// Something drawn the same way to PNG and SVG: `scale` multiplies every size (1 for SVG,
/// 300/96 for the PNG).
pub trait Figure {
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, plotters::coord::Shift>,
        scale: f64,
    ) -> Result<(), String>
    where
        DB::ErrorType: 'static;
}

impl Figure for LineChart {
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, plotters::coord::Shift>,
        scale: f64,
    ) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        draw(root, self, scale)
    }
}

/// Renders a drawing to `path` as PNG (300 dpi) or SVG (embedded font), adding provenance.
/// `size` is in CSS pixels.
pub fn render<F: Figure>(
    path: &Path,
    size: (u32, u32),
    fig: &F,
    provenance: Option<&Provenance>,
) -> Result<(), PlotError> {
    register_font();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let shown = path.display().to_string();
    let draw_err = |e: String| PlotError::Draw {
        path: shown.clone(),
        why: e,
    };
    let io_err = |e: std::io::Error| PlotError::Draw {
        path: shown.clone(),
        why: e.to_string(),
    };
    match ext.as_str() {
        "png" => {
            let scale = f64::from(PNG_DPI) / 96.0;
            let (w, h) = (
                (f64::from(size.0) * scale).round() as u32,
                (f64::from(size.1) * scale).round() as u32,
            );
            {
                let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
                fig.draw(&root, scale).map_err(draw_err)?;
                root.present().map_err(|e| draw_err(e.to_string()))?;
            }
            // plotters' encoder writes no text chunks: they are added to the file it wrote.
            let png = std::fs::read(path).map_err(io_err)?;
            let texts: Vec<(&str, &str)> =
                provenance.map(|p| p.pairs().to_vec()).unwrap_or_default();
            let png = png_with_text(&png, &texts, Some(PNG_DPI));
            std::fs::write(path, png).map_err(io_err)
        }
        "svg" => {
            let mut text = String::new();
            {
                let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
                fig.draw(&root, 1.0).map_err(draw_err)?;
                root.present().map_err(|e| draw_err(e.to_string()))?;
            }
            let mut head = provenance.map(Provenance::svg_elements).unwrap_or_default();
            head.push_str(&font_face());
            std::fs::write(path, svg_insert_after_open(&text, &head)).map_err(io_err)
        }
        _ => Err(PlotError::Extension { path: shown }),
    }
}

/// The embedded font as an SVG `<defs><style>` with an `@font-face` data URL.
fn font_face() -> String {
    format!(
        "<defs><style>@font-face {{ font-family: \"{FONT}\"; src: url(data:font/ttf;base64,{}) format(\"truetype\"); }}</style></defs>\n",
        base64(epaint_default_fonts::HACK_REGULAR)
    )
}

/// Standard base64 with padding (RFC 4648), for the font data URL.
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= c.len() {
                out.push(A[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The y range a log axis shows: whole decades around the data.
fn decades(y0: f64, y1: f64) -> (f64, f64) {
    let lo = 10f64.powf(y0.log10().floor());
    let mut hi = 10f64.powf(y1.log10().ceil());
    if hi <= lo {
        hi = lo * 10.0;
    }
    (lo, hi)
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &LineChart,
    s: f64,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    let px = |v: f64| (v * s).round() as i32;
    let pxu = |v: f64| (v * s).round().max(1.0) as u32;
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
    } else {
        let pad = (x1 - x0) * 0.03;
        (x0, x1) = (x0 - pad, x1 + pad);
    }
    if chart.log_y {
        (y0, y1) = decades(y0, y1);
    } else {
        let pad = ((y1 - y0) * 0.05).max(1e-9);
        (y0, y1) = (if y0 >= 0.0 { 0.0 } else { y0 - pad }, y1 + pad);
    }
    // The legend goes in the corner where it hides the fewest points (upper left on ties):
    // points normalised to the axes, the legend taken as a box of its likely size.
    let legend_pos = {
        let ny = |y: f64| {
            if chart.log_y {
                (y.log10() - y0.log10()) / (y1.log10() - y0.log10())
            } else {
                (y - y0) / (y1 - y0)
            }
        };
        let (bw, bh) = (0.38, 0.06 * chart.series.len() as f64 + 0.04);
        let corners = [
            (SeriesLabelPosition::UpperLeft, 0.0, 1.0 - bh),
            (SeriesLabelPosition::UpperRight, 1.0 - bw, 1.0 - bh),
            (SeriesLabelPosition::LowerRight, 1.0 - bw, 0.0),
            (SeriesLabelPosition::LowerLeft, 0.0, 0.0),
        ];
        let hidden = |cx: f64, cy: f64| {
            pts()
                .filter(|p| !chart.log_y || p.1 > 0.0)
                .map(|p| ((p.0 - x0) / (x1 - x0), ny(p.1)))
                .filter(|&(x, y)| x >= cx && x <= cx + bw && y >= cy && y <= cy + bh)
                .count()
        };
        let mut best = (usize::MAX, SeriesLabelPosition::UpperLeft);
        for (pos, cx, cy) in corners {
            let n = hidden(cx, cy);
            if n < best.0 {
                best = (n, pos);
            }
        }
        best.1
    };
    // The note goes in a strip under the plot.
    let note_h = if chart.note.is_empty() { 0 } else { pxu(20.0) };
    let (w, h) = root.dim_in_pixel();
    let (plot_area, note_area) = root.split_vertically(h - note_h);
    if note_h > 0 {
        note_area
            .draw(&Text::new(
                chart.note.clone(),
                (px(12.0), px(3.0)),
                (FONT, 11.0 * s).into_font().color(&BLACK.mix(0.8)),
            ))
            .map_err(e)?;
    }
    // Many series: the legend goes in a column right of the plot, where it hides nothing.
    let outside = chart.series.len() > 6;
    let longest = chart
        .series
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0);
    let legend_w = if outside {
        (((longest as f64) * 6.8 + 52.0) * s).min(f64::from(w) * 0.45) as u32
    } else {
        0
    };
    let (chart_area, legend_area) = plot_area.split_horizontally(w - legend_w);
    if outside {
        let top = px(40.0);
        for (k, ser) in chart.series.iter().enumerate() {
            let (color, (dash, gap), shape, filled) = series_style(k);
            let y = top + px(17.0) * k as i32;
            let (dash_px, gap_px) = if dash == 0.0 {
                (1_000_000, 0)
            } else {
                (px(dash), px(gap))
            };
            legend_area
                .draw(&DashedPathElement::new(
                    vec![(px(4.0), y), (px(32.0), y)],
                    dash_px,
                    gap_px,
                    color.stroke_width(pxu(1.6)),
                ))
                .map_err(e)?;
            let r = 3.4 * s;
            let poly: Vec<(i32, i32)> = shape
                .iter()
                .map(|&(a, b)| {
                    (
                        px(18.0) + (a * r).round() as i32,
                        y + (b * r).round() as i32,
                    )
                })
                .collect();
            let mut outline = poly.clone();
            outline.push(poly[0]);
            legend_area
                .draw(&Polygon::new(
                    poly,
                    if filled {
                        color.filled()
                    } else {
                        WHITE.filled()
                    },
                ))
                .map_err(e)?;
            legend_area
                .draw(&PathElement::new(outline, color.stroke_width(pxu(1.6))))
                .map_err(e)?;
            legend_area
                .draw(&Text::new(
                    ser.name.clone(),
                    (px(38.0), y - px(6.0)),
                    (FONT, 11.0 * s).into_font(),
                ))
                .map_err(e)?;
        }
    }
    let mut builder = ChartBuilder::on(&chart_area);
    builder
        .caption(&chart.title, (FONT, 15.0 * s))
        .margin(px(10.0))
        .x_label_area_size(px(36.0))
        .y_label_area_size(px(58.0));
    let stroke = pxu(1.6);
    macro_rules! body {
        ($ctx:expr, $ylab:expr) => {{
            let mut ctx = $ctx;
            let name_of = |x: &f64| {
                let k = x.round();
                match chart.x_names.get((k as usize).wrapping_sub(1)) {
                    Some(name) if (x - k).abs() < 1e-6 => name.clone(),
                    _ => String::new(),
                }
            };
            let mut mesh = ctx.configure_mesh();
            if !chart.x_names.is_empty() {
                mesh.x_labels(chart.x_names.len())
                    .x_label_formatter(&name_of);
            }
            mesh.x_desc(chart.x_label.as_str())
                .y_desc(chart.y_label.as_str())
                .y_label_formatter($ylab)
                .label_style((FONT, 11.0 * s))
                .axis_desc_style((FONT, 12.0 * s))
                .bold_line_style(BLACK.mix(0.12).stroke_width(pxu(0.5)))
                .light_line_style(BLACK.mix(0.04).stroke_width(pxu(0.5)))
                .axis_style(BLACK.stroke_width(pxu(0.8)))
                .set_all_tick_mark_size(px(4.0))
                .draw()
                .map_err(e)?;
            for (k, ser) in chart.series.iter().enumerate() {
                let (color, (dash, gap), shape, filled) = series_style(k);
                let r = 3.4 * s;
                let poly: Vec<(i32, i32)> = shape
                    .iter()
                    .map(|&(a, b)| ((a * r).round() as i32, (b * r).round() as i32))
                    .collect();
                let mut outline = poly.clone();
                outline.push(poly[0]);
                let line_style = color.stroke_width(stroke);
                // A solid line is one dash longer than any path.
                let (dash_px, gap_px) = if dash == 0.0 {
                    (1_000_000, 0)
                } else {
                    (px(dash), px(gap))
                };
                macro_rules! mark {
                    ($p:expr, $poly:expr, $outline:expr) => {
                        EmptyElement::at($p)
                            + Polygon::new(
                                $poly,
                                if filled {
                                    color.filled()
                                } else {
                                    WHITE.filled()
                                },
                            )
                            + PathElement::new($outline, color.stroke_width(stroke))
                    };
                }
                let ok: Vec<(f64, f64)> = ser
                    .points
                    .iter()
                    .copied()
                    .filter(|p| p.0.is_finite() && p.1.is_finite() && (!chart.log_y || p.1 > 0.0))
                    .collect();
                if let Some(err) = &ser.error {
                    let bars = ser.points.iter().zip(err).filter(|(p, h)| {
                        p.1.is_finite() && h.is_finite() && **h > 0.0 && (!chart.log_y || p.1 > 0.0)
                    });
                    let cap = 3.0 * s;
                    ctx.draw_series(bars.map(|(&(x, y), &h)| {
                        // On a log axis a bar reaching zero or below is cut at the axis.
                        let lo = if chart.log_y { (y - h).max(y0) } else { y - h };
                        let c = (cap.round() as i32, 0);
                        EmptyElement::at((x, lo))
                            + PathElement::new(
                                vec![(-c.0, 0), (c.0, 0)],
                                color.stroke_width(pxu(1.0)),
                            )
                    }))
                    .map_err(e)?;
                    let bars = ser.points.iter().zip(err).filter(|(p, h)| {
                        p.1.is_finite() && h.is_finite() && **h > 0.0 && (!chart.log_y || p.1 > 0.0)
                    });
                    ctx.draw_series(bars.map(|(&(x, y), &h)| {
                        let lo = if chart.log_y { (y - h).max(y0) } else { y - h };
                        PathElement::new(vec![(x, lo), (x, y + h)], color.stroke_width(pxu(1.0)))
                    }))
                    .map_err(e)?;
                    let bars = ser.points.iter().zip(err).filter(|(p, h)| {
                        p.1.is_finite() && h.is_finite() && **h > 0.0 && (!chart.log_y || p.1 > 0.0)
                    });
                    ctx.draw_series(bars.map(|(&(x, y), &h)| {
                        let c = cap.round() as i32;
                        EmptyElement::at((x, y + h))
                            + PathElement::new(vec![(-c, 0), (c, 0)], color.stroke_width(pxu(1.0)))
                    }))
                    .map_err(e)?;
                }
                let (p2, o2) = (poly.clone(), outline.clone());
                // A scatter draws an empty line only to carry the legend entry.
                let line = if ser.markers_only {
                    Vec::new()
                } else {
                    ok.clone()
                };
                ctx.draw_series(DashedLineSeries::new(line, dash_px, gap_px, line_style))
                    .map_err(e)?
                    .label(ser.name.as_str())
                    .legend(move |(x, y)| {
                        EmptyElement::at((x, y))
                            + DashedPathElement::new(
                                vec![(0, 0), (px(26.0), 0)],
                                dash_px,
                                gap_px,
                                line_style,
                            )
                            + mark!((px(13.0), 0), p2.clone(), o2.clone())
                    });
                ctx.draw_series(ok.iter().map(|&p| mark!(p, poly.clone(), outline.clone())))
                    .map_err(e)?;
            }
            if !outside {
                ctx.configure_series_labels()
                    .background_style(WHITE.mix(0.9))
                    .border_style(BLACK.mix(0.5))
                    .label_font((FONT, 11.0 * s))
                    .legend_area_size(px(34.0))
                    .margin(px(6.0))
                    .position(legend_pos.clone())
                    .draw()
                    .map_err(e)?;
            }
        }};
    }
    if chart.log_y {
        body!(
            builder
                .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
                .map_err(e)?,
            &|v: &f64| decade_label(*v)
        );
    } else {
        body!(
            builder.build_cartesian_2d(x0..x1, y0..y1).map_err(e)?,
            &|v: &f64| {
                let a = v.abs();
                if a != 0.0 && !(1e-3..1e5).contains(&a) {
                    format!("{v:.1e}")
                } else {
                    format!("{}", (v * 1e4).round() / 1e4)
                }
            }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decade_labels_only_at_powers_of_ten() {
        assert_eq!(decade_label(1.0), "10⁰");
        assert_eq!(decade_label(1000.0), "10³");
        assert_eq!(decade_label(0.01), "10⁻²");
        assert_eq!(decade_label(20.0), "");
        assert_eq!(decades(3.0, 450.0), (1.0, 1000.0));
        assert_eq!(base64(b"Man"), "TWFu");
        assert_eq!(base64(b"Ma"), "TWE=");
        assert_eq!(base64(b"M"), "TQ==");
    }

    #[test]
    fn writes_png_and_svg() {
        let tmp = tempfile::Builder::new()
            .prefix("cosched-sim-plot-")
            .tempdir()
            .unwrap();
        let dir = tmp.path();
        let chart = LineChart {
            x_names: Vec::new(),
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
            note: "bars: 90 % CI".into(),
            provenance: Some(Provenance {
                version: "cosched test".into(),
                ..Provenance::default()
            }),
        };
        line_chart(&dir.join("c.png"), &chart).unwrap();
        line_chart(&dir.join("c.svg"), &chart).unwrap();
        let png = std::fs::read(dir.join("c.png")).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        // 300 dpi: 11811 pixels per metre.
        let phys = png.windows(4).position(|w| w == b"pHYs").unwrap();
        assert_eq!(&png[phys + 4..phys + 8], &11811u32.to_be_bytes());
        let text: &[u8] = b"tEXtgenerator\0cosched test";
        assert!(png.windows(text.len()).any(|w| w == text));
        let svg = std::fs::read_to_string(dir.join("c.svg")).unwrap();
        assert!(svg.contains("<svg") && svg.contains("bounded slowdown"));
        assert!(svg.contains("@font-face") && svg.contains("font-family=\"Hack\""));
        assert!(svg.contains("10¹") && svg.contains("bars: 90 % CI"));
        assert!(svg.contains("generator=\"cosched test\""));
        assert!(matches!(
            line_chart(&dir.join("c.gif"), &chart),
            Err(PlotError::Extension { .. })
        ));
        let empty = LineChart {
            x_names: Vec::new(),
            series: vec![],
            ..chart
        };
        assert!(line_chart(&dir.join("e.svg"), &empty).is_err());
        if std::env::var_os("COSCHED_KEEP_PLOTS").is_some() {
            eprintln!("plots kept in {}", tmp.keep().display());
        }
    }
}
