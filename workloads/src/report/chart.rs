//! SVG charts for the HTML report, drawn with plotters' SVG backend: the
//! stacked bars of median stage times per configuration (as in the FTK
//! study), and per configuration a line chart of the machine's CPU shares and
//! load through the stages of its representative run (the Munin view).

use super::CompareReport;
use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Stage colours (Tableau 10): distinct on screen and in print.
pub(crate) const STAGE_COLOURS: [RGBColor; 10] = [
    RGBColor(78, 121, 167),
    RGBColor(242, 142, 43),
    RGBColor(89, 161, 79),
    RGBColor(225, 87, 89),
    RGBColor(118, 183, 178),
    RGBColor(237, 201, 72),
    RGBColor(176, 122, 161),
    RGBColor(255, 157, 167),
    RGBColor(156, 117, 95),
    RGBColor(186, 176, 172),
];

/// The colour of the `i`-th stage.
pub(crate) fn stage_colour(i: usize) -> RGBColor {
    STAGE_COLOURS[i % STAGE_COLOURS.len()]
}

/// CSS `#rrggbb` of a colour.
pub(crate) fn css(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

const FONT: &str = "sans-serif";
const USER: RGBColor = RGBColor(78, 121, 167);
const SYSTEM: RGBColor = RGBColor(225, 87, 89);
const IOWAIT: RGBColor = RGBColor(242, 142, 43);
const LOAD: RGBColor = RGBColor(90, 90, 90);

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// The series' legend, boxed, at `position`.
fn legend<'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, 12))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(err)
}

/// Horizontal stacked bars: one bar per configuration (baseline first), one
/// segment per stage (median wall seconds), a whisker over the range of run
/// totals, and the total with its ratio at the end of the bar.
pub fn stacked_stage_bars(report: &CompareReport) -> Result<String, String> {
    let n = report.configurations.len();
    if n == 0 {
        return Err("no configuration".into());
    }
    let stages = &report.workload.stages;
    let medians = |config: usize| -> Vec<f64> {
        let summary = report.summary.iter().find(|s| s.configuration == config);
        stages
            .iter()
            .map(|name| {
                summary
                    .and_then(|s| s.stages.iter().find(|x| &x.name == name))
                    .map_or(0.0, |x| x.wall_seconds.median)
            })
            .collect()
    };
    let mut x_max: f64 = 0.0;
    for c in 0..n {
        x_max = x_max.max(medians(c).iter().sum());
        if let Some(t) = report
            .summary
            .iter()
            .find(|s| s.configuration == c)
            .and_then(|s| s.total_seconds)
        {
            x_max = x_max.max(t.max);
        }
    }
    if x_max <= 0.0 {
        x_max = 1.0;
    }
    // Room on the right for the total and ratio printed after each bar.
    let x_end = x_max * 1.22;
    let longest_label = report
        .configurations
        .iter()
        .map(|c| c.label.chars().count() + 4)
        .max()
        .unwrap_or(8);
    let label_area = (longest_label as u32 * 7 + 16).clamp(80, 420);
    let width = 1100u32;
    let legend_rows = stages.len().div_ceil(6).max(1) as u32;
    let height = 90 + 44 * n as u32 + 22 * legend_rows;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (legend, plot) = root.split_vertically(22 * legend_rows + 12);
        draw_legend(&legend, stages)?;
        let mut chart = ChartBuilder::on(&plot)
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(label_area)
            .build_cartesian_2d(0.0..x_end, (0..n).into_segmented())
            .map_err(err)?;
        // Bars are drawn top-down in configuration order: configuration i
        // sits on segment n-1-i.
        let row = |config: usize| n - 1 - config;
        let labels: Vec<String> = report
            .configurations
            .iter()
            .map(|c| {
                if c.index == report.baseline {
                    format!("{} (base)", c.label)
                } else {
                    c.label.clone()
                }
            })
            .collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("median seconds per stage, stacked; whisker: range of run totals")
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 13))
            .y_label_formatter(&|v: &SegmentValue<usize>| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) if *i < n => {
                    labels[n - 1 - *i].clone()
                }
                _ => String::new(),
            })
            .draw()
            .map_err(err)?;
        for (si, _) in stages.iter().enumerate() {
            let colour = stage_colour(si);
            let bars: Vec<Rectangle<(f64, SegmentValue<usize>)>> = (0..n)
                .filter_map(|c| {
                    let m = medians(c);
                    let start: f64 = m[..si].iter().sum();
                    let len = m[si];
                    (len > 0.0).then(|| {
                        let mut r = Rectangle::new(
                            [
                                (start, SegmentValue::Exact(row(c))),
                                (start + len, SegmentValue::Exact(row(c) + 1)),
                            ],
                            colour.filled(),
                        );
                        r.set_margin(9, 9, 0, 0);
                        r
                    })
                })
                .collect();
            chart.draw_series(bars).map_err(err)?;
        }
        for c in 0..n {
            let Some(summary) = report.summary.iter().find(|s| s.configuration == c) else {
                continue;
            };
            let end: f64 = medians(c).iter().sum();
            if let Some(t) = summary.total_seconds {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![
                            (t.min, SegmentValue::CenterOf(row(c))),
                            (t.max, SegmentValue::CenterOf(row(c))),
                        ],
                        BLACK.stroke_width(2),
                    )))
                    .map_err(err)?;
            }
            let text = match (summary.total_seconds, summary.total_ratio) {
                (Some(t), Some(r)) => format!("{:.2} s  x{r:.2}", t.median),
                (Some(t), None) => format!("{:.2} s", t.median),
                _ if summary.runs_completed == 0 => {
                    format!("no completed run ({} failed)", summary.runs)
                }
                _ => String::new(),
            };
            let x = end.max(summary.total_seconds.map_or(0.0, |t| t.max));
            chart
                .draw_series(std::iter::once(Text::new(
                    text,
                    (x + x_max * 0.01, SegmentValue::CenterOf(row(c))),
                    (FONT, 13)
                        .into_font()
                        .color(&BLACK)
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                )))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn draw_legend(area: &DrawingArea<SVGBackend<'_>, Shift>, stages: &[String]) -> Result<(), String> {
    let per_row = 6usize;
    for (i, name) in stages.iter().enumerate() {
        let x = 20 + (i % per_row) as i32 * 170;
        let y = 8 + (i / per_row) as i32 * 22;
        area.draw(&Rectangle::new(
            [(x, y), (x + 14, y + 14)],
            stage_colour(i).filled(),
        ))
        .map_err(err)?;
        area.draw(&Text::new(
            name.clone(),
            (x + 20, y + 7),
            (FONT, 14)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(err)?;
    }
    Ok(())
}

/// One stage of a representative run: its name, wall time and samples.
pub struct StageSeries<'a> {
    /// Stage name.
    pub name: &'a str,
    /// Stage wall seconds in that run.
    pub wall_seconds: f64,
    /// Samples, `t` from the stage's start.
    pub samples: &'a [caseload_engine::sampler::CpuSample],
}

/// CPU user/system/iowait (percent of all CPUs, left axis) and 1-minute
/// load (right axis) through the stages of one run, stages laid end to end
/// with their boundaries marked.
pub fn cpu_lines(series: &[StageSeries<'_>], cpus: usize) -> Result<String, String> {
    let total: f64 = series.iter().map(|s| s.wall_seconds).sum();
    let total = if total > 0.0 { total } else { 1.0 };
    let mut user = Vec::new();
    let mut system = Vec::new();
    let mut iowait = Vec::new();
    let mut load = Vec::new();
    let mut offset = 0.0;
    let mut boundaries = Vec::new();
    for s in series {
        for p in s.samples {
            let t = offset + p.t.min(s.wall_seconds.max(0.0));
            user.push((t, p.user_pct));
            system.push((t, p.system_pct));
            iowait.push((t, p.iowait_pct));
            load.push((t, p.load1));
        }
        boundaries.push((offset, s.name));
        offset += s.wall_seconds.max(0.0);
    }
    let load_max = load
        .iter()
        .map(|(_, l)| *l)
        .fold(cpus.max(1) as f64, f64::max)
        .ceil();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 230)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(44)
            .right_y_label_area_size(40)
            .build_cartesian_2d(0.0..total, 0.0..100.0)
            .map_err(err)?
            .set_secondary_coord(0.0..total, 0.0..load_max);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("seconds")
            .y_desc("% of all CPUs")
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 12))
            .draw()
            .map_err(err)?;
        chart
            .configure_secondary_axes()
            .y_desc("load")
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 12))
            .draw()
            .map_err(err)?;
        for (i, (x, name)) in boundaries.iter().enumerate() {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(*x, 0.0), (*x, 100.0)],
                    stage_colour(i).stroke_width(1),
                )))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    name.to_string(),
                    (*x + total * 0.005, 97.0),
                    (FONT, 12).into_font().color(&stage_colour(i)),
                )))
                .map_err(err)?;
        }
        for (points, colour, label) in [
            (user, USER, "user"),
            (system, SYSTEM, "system"),
            (iowait, IOWAIT, "iowait"),
        ] {
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
                });
        }
        chart
            .draw_secondary_series(LineSeries::new(load, LOAD.stroke_width(1)))
            .map_err(err)?
            .label("load1 (right)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], LOAD.stroke_width(1)));
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Throughput against workers (`caseload model`): the MVA prediction and
/// the asymptotic bound, evidence MB/s over the whole case.
pub fn model_throughput(m: &crate::model::ModelReport) -> Result<String, String> {
    let mb = |t: f64| {
        if t > 0.0 {
            m.evidence_bytes as f64 / t / 1e6
        } else {
            0.0
        }
    };
    let predicted: Vec<(f64, f64)> = m
        .workers
        .iter()
        .zip(&m.total_s)
        .map(|(n, t)| (*n as f64, mb(*t)))
        .collect();
    let bound: Vec<(f64, f64)> = m
        .workers
        .iter()
        .zip(&m.total_bound_s)
        .map(|(n, t)| (*n as f64, mb(*t)))
        .collect();
    let x_max = m.workers.iter().copied().max().unwrap_or(1).max(2) as f64;
    let y_max = bound
        .iter()
        .chain(&predicted)
        .map(|(_, y)| *y)
        .filter(|y| y.is_finite())
        .fold(1.0, f64::max)
        * 1.1;
    xy_chart(
        (1.0..x_max, y_max),
        ("workstations", "evidence MB/s"),
        SeriesLabelPosition::LowerRight,
        |chart| {
            chart
                .draw_series(LineSeries::new(bound, LOAD.stroke_width(1)))
                .map_err(err)?
                .label("bound: min(N/(D+Z), 1/D_max) per stage")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], LOAD.stroke_width(1)));
            chart
                .draw_series(LineSeries::new(predicted.clone(), USER.stroke_width(2)))
                .map_err(err)?
                .label("MVA prediction")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], USER.stroke_width(2)));
            chart
                .draw_series(predicted.iter().map(|p| Circle::new(*p, 3, USER.filled())))
                .map_err(err)?;
            Ok(())
        },
    )
}

/// An SVG chart of lines over `x` (a range) and `0..y_max`, its axes
/// described, its legend at `legend_at`: what `draw` puts on it.
type XyChart<'a> = ChartContext<
    'a,
    SVGBackend<'a>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn xy_chart(
    (x, y_max): (std::ops::Range<f64>, f64),
    (x_desc, y_desc): (&str, &str),
    legend_at: SeriesLabelPosition,
    draw: impl for<'a> FnOnce(&mut XyChart<'a>) -> Result<(), String>,
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (700, 320)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(34)
            .y_label_area_size(56)
            .build_cartesian_2d(x, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 12))
            .draw()
            .map_err(err)?;
        draw(&mut chart)?;
        legend(&mut chart, legend_at)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The shared channels' throughput over a distributed case (`cluster`,
/// `report`): evidence, case and database MB/s against seconds since the
/// first unit started.
pub fn case_throughput(bins: &[caseload_engine::work::ThroughputBin]) -> Result<String, String> {
    let line = |f: fn(&caseload_engine::work::ThroughputBin) -> f64| -> Vec<(f64, f64)> {
        bins.iter()
            .map(|b| (b.at_seconds + b.seconds / 2.0, f(b)))
            .collect()
    };
    let series = [
        ("evidence read MB/s", line(|b| b.evidence_mb_per_s), USER),
        ("case MB/s", line(|b| b.case_mb_per_s), IOWAIT),
        (
            "database server MB/s",
            line(|b| b.database_mb_per_s),
            SYSTEM,
        ),
    ];
    let x_max = bins
        .last()
        .map_or(1.0, |b| b.at_seconds + b.seconds)
        .max(1.0);
    let y_max = series
        .iter()
        .flat_map(|(_, s, _)| s.iter().map(|(_, y)| *y))
        .filter(|y| y.is_finite())
        .fold(1.0, f64::max)
        * 1.1;
    xy_chart(
        (0.0..x_max, y_max),
        ("seconds since the first unit started", "MB/s, all workers"),
        SeriesLabelPosition::UpperRight,
        |chart| {
            for (label, points, colour) in series {
                chart
                    .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                    .map_err(err)?
                    .label(label)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
                    });
            }
            Ok(())
        },
    )
}

/// Paired bars, the study's and caseload's, per group (a configuration's
/// ratio to its table's first row, or E01 over DD): `(label, study,
/// caseload)`; a missing value draws no bar.
pub fn paired_bars(
    groups: &[(String, Option<f64>, Option<f64>)],
    y_desc: &str,
) -> Result<String, String> {
    let y_max = groups
        .iter()
        .flat_map(|(_, a, b)| [*a, *b])
        .flatten()
        .filter(|v| v.is_finite())
        .fold(1.0, f64::max)
        * 1.15;
    let n = groups.len().max(1) as f64;
    let labels: Vec<String> = groups.iter().map(|(l, _, _)| l.clone()).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, 340)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..n, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(groups.len().max(1))
            .x_label_formatter(&|x| {
                let i = x.floor() as usize;
                if (x - x.floor() - 0.5).abs() < 0.26 {
                    labels.get(i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc(y_desc)
            .label_style((FONT, 11))
            .axis_desc_style((FONT, 12))
            .draw()
            .map_err(err)?;
        let study = RGBColor(186, 176, 172);
        for (colour, offset, name, pick) in [
            (study, 0.12, "FTK 4 study", 0usize),
            (USER, 0.5, "caseload", 1),
        ] {
            let bars: Vec<Rectangle<(f64, f64)>> = groups
                .iter()
                .enumerate()
                .filter_map(|(i, (_, a, b))| {
                    let v = if pick == 0 { *a } else { *b }?;
                    let x = i as f64 + offset;
                    Some(Rectangle::new([(x, 0.0), (x + 0.38, v)], colour.filled()))
                })
                .collect();
            chart
                .draw_series(bars)
                .map_err(err)?
                .label(name)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                });
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Predicted total against price (`caseload advise`): every configuration
/// a dot, the Pareto front joined and labelled, each front point with the
/// model's stated error as a whisker. `points`: (price, seconds, on the
/// front, label).
pub fn price_time(
    points: &[(f64, f64, bool, String)],
    currency: &str,
    error: f64,
) -> Result<String, String> {
    // Room on the right for the last front label.
    let x_max = points.iter().map(|p| p.0).fold(1.0, f64::max) * 1.25;
    let y_max = points
        .iter()
        .map(|p| p.1 * (1.0 + error))
        .filter(|y| y.is_finite())
        .fold(1.0, f64::max)
        * 1.1;
    let mut front: Vec<&(f64, f64, bool, String)> = points.iter().filter(|p| p.2).collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    let x_desc = format!("price ({currency})");
    xy_chart(
        (0.0..x_max, y_max),
        (&x_desc, "predicted total, s"),
        SeriesLabelPosition::UpperRight,
        |chart| {
            chart
                .draw_series(
                    points
                        .iter()
                        .filter(|p| !p.2)
                        .map(|p| Circle::new((p.0, p.1), 3, LOAD.mix(0.5).filled())),
                )
                .map_err(err)?
                .label("configuration")
                .legend(|(x, y)| Circle::new((x + 8, y), 3, LOAD.mix(0.5).filled()));
            // The front as a staircase: each step holds until a cheaper
            // configuration is beaten.
            let mut steps: Vec<(f64, f64)> = Vec::new();
            for (i, p) in front.iter().enumerate() {
                if i > 0 {
                    steps.push((p.0, front[i - 1].1));
                }
                steps.push((p.0, p.1));
            }
            if let Some(last) = front.last() {
                steps.push((x_max, last.1));
            }
            chart
                .draw_series(LineSeries::new(steps, USER.stroke_width(2)))
                .map_err(err)?
                .label("Pareto front")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], USER.stroke_width(2)));
            chart
                .draw_series(front.iter().map(|p| {
                    PathElement::new(
                        vec![(p.0, p.1 * (1.0 - error)), (p.0, p.1 * (1.0 + error))],
                        USER.stroke_width(1),
                    )
                }))
                .map_err(err)?;
            chart
                .draw_series(
                    front
                        .iter()
                        .map(|p| Circle::new((p.0, p.1), 4, USER.filled())),
                )
                .map_err(err)?;
            chart
                .draw_series(front.iter().map(|p| {
                    Text::new(
                        p.3.clone(),
                        (p.0, p.1),
                        (FONT, 11)
                            .into_font()
                            .color(&BLACK)
                            .pos(Pos::new(HPos::Left, VPos::Bottom)),
                    )
                }))
                .map_err(err)?;
            Ok(())
        },
    )
}
