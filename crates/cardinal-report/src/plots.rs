//! The plots, drawn with plotters' SVG backend into strings that the page inlines.
//!
//! Every plot is a pure function of its input: the same data gives the same SVG bytes (the
//! scatter's jitter is derived from the item id, not from a random source).

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::{ReportError, Result};

const FONT: &str = "sans-serif";

/// Bar fill per slice group: overall, language, case type, gold-labelled, other.
pub const GROUP_COLORS: [RGBColor; 5] = [
    RGBColor(110, 110, 110),
    RGBColor(78, 121, 167),
    RGBColor(89, 161, 79),
    RGBColor(242, 142, 43),
    RGBColor(176, 122, 161),
];

/// Colours of reference marks drawn across bars (baseline, shortcut baselines, ceilings...).
pub const MARK_COLORS: [RGBColor; 6] = [
    RGBColor(20, 20, 20),
    RGBColor(156, 117, 95),
    RGBColor(118, 183, 178),
    RGBColor(237, 201, 72),
    RGBColor(255, 157, 167),
    RGBColor(186, 176, 172),
];

/// The colour of a horizontal rule (a gate or floor).
pub const RULE_COLOR: RGBColor = RGBColor(225, 87, 89);

/// `#rrggbb` of a colour, for legends in the page.
pub fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

fn plot_err<E: std::fmt::Display>(plot: &str) -> impl Fn(E) -> ReportError + '_ {
    move |e| ReportError::Plot {
        plot: plot.to_string(),
        message: e.to_string(),
    }
}

/// A horizontal mark across one bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// Where.
    pub value: f64,
    /// Index into [`MARK_COLORS`].
    pub color: usize,
}

/// One bar: a mean with its interval and n.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Axis label.
    pub label: String,
    /// Index into [`GROUP_COLORS`].
    pub group: usize,
    /// The bar's height.
    pub mean: f64,
    /// The interval drawn as a whisker, if any.
    pub ci: Option<(f64, f64)>,
    /// Shown above the bar.
    pub n: usize,
    /// Reference marks across the bar.
    pub marks: Vec<Mark>,
}

/// A bar chart with interval whiskers.
#[derive(Debug, Clone)]
pub struct BarChart<'a> {
    /// Caption.
    pub title: &'a str,
    /// Y axis description.
    pub y_desc: &'a str,
    /// Y axis range.
    pub y_range: (f64, f64),
    /// The bars, left to right.
    pub bars: &'a [Bar],
    /// A horizontal rule across the chart (a gate), if any.
    pub rule: Option<f64>,
}

/// Draws a [`BarChart`].
pub fn bar_chart(c: &BarChart<'_>) -> Result<String> {
    let err = plot_err(c.title);
    let n = c.bars.len().max(1);
    let width = (66 * n as u32 + 100).clamp(300, 980);
    let (y0, y1) = c.y_range;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, 260)).into_drawing_area();
        root.fill(&WHITE).map_err(&err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .caption(c.title, (FONT, 15))
            .x_label_area_size(28)
            .y_label_area_size(48)
            .build_cartesian_2d((0..n - 1).into_segmented(), y0..y1)
            .map_err(&err)?;
        let labels: Vec<&str> = c.bars.iter().map(|b| b.label.as_str()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(RGBColor(238, 238, 238))
            .bold_line_style(RGBColor(220, 220, 220))
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i).copied().unwrap_or("").to_string(),
                _ => String::new(),
            })
            .y_labels(6)
            .y_desc(c.y_desc)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 12))
            .draw()
            .map_err(&err)?;
        chart
            .draw_series(c.bars.iter().enumerate().map(|(i, b)| {
                let mut r = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), y0),
                        (SegmentValue::Exact(i + 1), b.mean.clamp(y0, y1)),
                    ],
                    GROUP_COLORS[b.group % GROUP_COLORS.len()].filled(),
                );
                r.set_margin(0, 0, 9, 9);
                r
            }))
            .map_err(&err)?;
        chart
            .draw_series(c.bars.iter().enumerate().filter_map(|(i, b)| {
                let (lo, hi) = b.ci?;
                Some(ErrorBar::new_vertical(
                    SegmentValue::CenterOf(i),
                    lo.clamp(y0, y1),
                    b.mean.clamp(y0, y1),
                    hi.clamp(y0, y1),
                    BLACK.stroke_width(1),
                    10,
                ))
            }))
            .map_err(&err)?;
        chart
            .draw_series(c.bars.iter().enumerate().flat_map(|(i, b)| {
                b.marks.iter().map(move |m| {
                    PathElement::new(
                        vec![
                            (SegmentValue::Exact(i), m.value.clamp(y0, y1)),
                            (SegmentValue::Exact(i + 1), m.value.clamp(y0, y1)),
                        ],
                        MARK_COLORS[m.color % MARK_COLORS.len()].stroke_width(3),
                    )
                })
            }))
            .map_err(&err)?;
        if let Some(rule) = c.rule {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![
                        (SegmentValue::Exact(0), rule),
                        (SegmentValue::Exact(c.bars.len()), rule),
                    ],
                    RULE_COLOR.stroke_width(2),
                )))
                .map_err(&err)?;
        }
        let n_style = TextStyle::from((FONT, 11).into_font())
            .color(&RGBColor(60, 60, 60))
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        chart
            .draw_series(c.bars.iter().enumerate().map(|(i, b)| {
                let top = b.ci.map_or(b.mean, |(_, hi)| hi.max(b.mean)).clamp(y0, y1);
                EmptyElement::at((SegmentValue::CenterOf(i), top))
                    + Text::new(format!("n={}", b.n), (0, -3), n_style.clone())
            }))
            .map_err(&err)?;
        root.present().map_err(&err)?;
    }
    Ok(svg)
}

/// Bin names in matrix order.
const BIN_NAMES: [&str; 3] = ["low 1–2", "mid 3", "high 4–5"];

/// A 3×3 confusion heatmap: rows the human bin (low at the top), columns the judge bin; each
/// cell shaded by its share of the row and labelled with its count.
pub fn heatmap(title: &str, matrix: &[[usize; 3]; 3]) -> Result<String> {
    let err = plot_err(title);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (300, 270)).into_drawing_area();
        root.fill(&WHITE).map_err(&err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .caption(title, (FONT, 14))
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((0..2usize).into_segmented(), (0..2usize).into_segmented())
            .map_err(&err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(3)
            .y_labels(3)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(j) => BIN_NAMES.get(*j).copied().unwrap_or("").into(),
                _ => String::new(),
            })
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(y) if *y < 3 => BIN_NAMES[2 - *y].into(),
                _ => String::new(),
            })
            .x_desc("judge")
            .y_desc("human")
            .label_style((FONT, 11))
            .axis_desc_style((FONT, 12))
            .draw()
            .map_err(&err)?;
        let mut cells = Vec::new();
        for (i, row) in matrix.iter().enumerate() {
            let total: usize = row.iter().sum();
            for (j, &count) in row.iter().enumerate() {
                let share = if total == 0 {
                    0.0
                } else {
                    count as f64 / total as f64
                };
                cells.push((i, j, count, share));
            }
        }
        chart
            .draw_series(cells.iter().map(|&(i, j, _, share)| {
                let y = 2 - i;
                let shade =
                    |from: u8, to: u8| (from as f64 + (to as f64 - from as f64) * share) as u8;
                let fill = RGBColor(shade(247, 31), shade(251, 86), shade(255, 150));
                let mut r = Rectangle::new(
                    [
                        (SegmentValue::Exact(j), SegmentValue::Exact(y)),
                        (SegmentValue::Exact(j + 1), SegmentValue::Exact(y + 1)),
                    ],
                    fill.filled(),
                );
                r.set_margin(1, 1, 1, 1);
                r
            }))
            .map_err(&err)?;
        chart
            .draw_series(cells.iter().map(|&(i, j, count, share)| {
                let style = TextStyle::from((FONT, 15).into_font())
                    .color(if share > 0.55 { &WHITE } else { &BLACK })
                    .pos(Pos::new(HPos::Center, VPos::Center));
                Text::new(
                    count.to_string(),
                    (SegmentValue::CenterOf(j), SegmentValue::CenterOf(2 - i)),
                    style,
                )
            }))
            .map_err(&err)?;
        root.present().map_err(&err)?;
    }
    Ok(svg)
}

/// One item of the judge-vs-human scatter.
#[derive(Debug, Clone, PartialEq)]
pub struct ScatterPoint {
    /// Item id (seeds the jitter).
    pub id: String,
    /// Human score, 1–5.
    pub human: u8,
    /// Judge score, 1–5.
    pub judge: u8,
}

/// Deterministic jitter in `[-0.28, 0.28]` from a string (FNV-1a, then two halves).
fn jitter(key: &str) -> (f64, f64) {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // One SplitMix64 finalisation step spreads nearby ids apart.
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    let unit = |x: u64| (x & 0xffff_ffff) as f64 / f64::from(u32::MAX);
    ((unit(h) - 0.5) * 0.56, (unit(h >> 32) - 0.5) * 0.56)
}

fn bin(score: u8) -> u8 {
    match score {
        0..=2 => 0,
        3 => 1,
        _ => 2,
    }
}

/// Judge (x) against human (y) on the 1–5 scale, every item jittered by its id so overlapping
/// items stay visible; the shaded squares are the same-bin (agreeing) regions.
pub fn scatter(title: &str, points: &[ScatterPoint]) -> Result<String> {
    let err = plot_err(title);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (290, 270)).into_drawing_area();
        root.fill(&WHITE).map_err(&err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .caption(title, (FONT, 14))
            .x_label_area_size(40)
            .y_label_area_size(40)
            .build_cartesian_2d(0.5f64..5.5, 0.5f64..5.5)
            .map_err(&err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(5)
            .y_labels(5)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .x_desc("judge")
            .y_desc("human")
            .label_style((FONT, 11))
            .axis_desc_style((FONT, 12))
            .draw()
            .map_err(&err)?;
        chart
            .draw_series(
                [(0.5, 2.5), (2.5, 3.5), (3.5, 5.5)]
                    .into_iter()
                    .map(|(a, b)| {
                        Rectangle::new([(a, a), (b, b)], RGBColor(226, 240, 217).filled())
                    }),
            )
            .map_err(&err)?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.5, 0.5), (5.5, 5.5)],
                RGBColor(170, 170, 170).stroke_width(1),
            )))
            .map_err(&err)?;
        chart
            .draw_series(points.iter().map(|p| {
                let (jx, jy) = jitter(&p.id);
                let agree = bin(p.human) == bin(p.judge);
                let color = if agree {
                    RGBColor(46, 125, 50)
                } else {
                    RGBColor(198, 40, 40)
                };
                Circle::new(
                    (f64::from(p.judge) + jx, f64::from(p.human) + jy),
                    3,
                    color.mix(0.6).filled(),
                )
            }))
            .map_err(&err)?;
        root.present().map_err(&err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_is_deterministic_and_bounded() {
        let a = jitter("cal-en-001");
        assert_eq!(a, jitter("cal-en-001"));
        assert_ne!(a, jitter("cal-en-002"));
        for i in 0..500 {
            let (x, y) = jitter(&format!("item-{i}"));
            assert!(x.abs() <= 0.28 && y.abs() <= 0.28);
        }
    }

    #[test]
    fn plots_are_svg_and_deterministic() {
        let bars = [Bar {
            label: "en <b>".into(),
            group: 1,
            mean: 0.5,
            ci: Some((0.3, 0.7)),
            n: 12,
            marks: vec![Mark {
                value: 0.6,
                color: 0,
            }],
        }];
        let chart = BarChart {
            title: "hit",
            y_desc: "mean",
            y_range: (0.0, 1.1),
            bars: &bars,
            rule: Some(0.8),
        };
        let a = bar_chart(&chart).unwrap();
        assert!(a.starts_with("<svg"), "{a}");
        assert!(a.contains("n=12"));
        assert!(
            a.contains("en &lt;b&gt;"),
            "labels are escaped by the backend"
        );
        assert_eq!(a, bar_chart(&chart).unwrap());
        let h = heatmap("h", &[[1, 2, 3], [0, 0, 0], [4, 5, 6]]).unwrap();
        assert!(h.contains("<rect") && h.contains(">\n6\n<") || h.contains("6"));
        let p = [ScatterPoint {
            id: "x".into(),
            human: 1,
            judge: 5,
        }];
        let s = scatter("s", &p).unwrap();
        assert!(s.contains("<circle"));
        assert_eq!(s, scatter("s", &p).unwrap());
    }
}
