//! The `--html` report: one self-contained page (inline CSS and SVG, no
//! scripts, no network) with the verdict, the table of ranks, per-rank step
//! time over the iterations, per-rank stacked bars of the top spans by self
//! time, and a step × rank table that names the slowest rank of each step.
//!
//! Made to be read on paper or in a screenshot: every axis has tick labels,
//! every bar and table cell prints its value (nothing needs a hover), the
//! straggler is marked with the `straggler` class (red, bold) in the table,
//! the charts and the step table, and colors print (`print-color-adjust`).
//! It only renders a [`Summary`]; the per-step comparison is the only figure
//! it derives (the slowest rank of each step, from the step times).
//!
//! This module holds the page, its tables and what the charts share
//! (escaping, colors, ticks); each chart is its own module, one function
//! per part of it (axis, rows, legend, table): `blame` (who made whom
//! wait), `steps` (the step figure over the iterations), `spans` (top
//! spans per rank).

mod blame;
mod spans;
mod steps;

use super::summary::{fmt_us, method_for, Method, RankSummary, Step, Summary};
use blame::blame_chart;
use spans::span_chart;
use std::collections::BTreeMap;
use std::fmt::Write;
use steps::step_chart;

const COLORS: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#76b7b2", "#b07aa1", "#edc948", "#9c755f", "#ff9da7",
    "#bab0ac", "#86bcb6",
];

/// The straggler's color (never one of [`COLORS`]).
const STRAGGLER: &str = "#d62728";

/// Most steps listed in the step × rank table.
const MAX_STEP_ROWS: usize = 100;

/// Escapes text for HTML.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

/// Escapes the verdict and turns its `code` spans into `<code>` elements,
/// so no literal backtick reaches the page.
fn verdict_html(s: &str) -> String {
    let mut o = String::new();
    for (i, part) in s.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(o, "<code>{}</code>", esc(part));
        } else {
            o.push_str(&esc(part));
        }
    }
    if s.matches('`').count() % 2 == 1 {
        // An unpaired backtick: the last "code" part was plain text.
        return esc(&s.replace('`', "'"));
    }
    o
}

fn color(i: usize) -> &'static str {
    COLORS[i % COLORS.len()]
}

impl Summary {
    /// The `--html` report: one self-contained page (inline CSS and SVG, no
    /// scripts, no network) with the verdict, the table of ranks, the step
    /// times, the top spans and the slowest rank of each step.
    pub fn to_html(&self) -> String {
        render(self)
    }
}

/// Whether `rank` is the straggler.
fn is_straggler(s: &Summary, rank: u32) -> bool {
    s.straggler.as_ref().is_some_and(|x| x.rank == rank)
}

/// A rank's line/bar color: red for the straggler, else its palette color.
/// Dash patterns that tell the ranks' lines apart without color (a printed
/// page in greyscale); the straggler's line is solid and thick.
const DASHES: [&str; 6] = ["8 4", "2 3", "10 3 2 3", "4 2", "1 5", "12 5"];

/// Marker shapes, one per rank, drawn on each point of its line.
const MARKERS: [Marker; 5] =
    [Marker::Square, Marker::Triangle, Marker::Diamond, Marker::Cross, Marker::Circle];

/// The straggler's marker: never one of the others'.
const STRAGGLER_MARKER: Marker = Marker::Dot;

#[derive(Clone, Copy)]
enum Marker {
    Square,
    Triangle,
    Diamond,
    Cross,
    Circle,
    Dot,
}

impl Marker {
    /// The marker centred on (`x`, `y`) as SVG.
    fn svg(self, x: f64, y: f64, color: &str) -> String {
        let r = 3.5;
        match self {
            Marker::Square => format!(
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#fff\" stroke=\"{color}\" stroke-width=\"1.4\"/>",
                x - r,
                y - r,
                2.0 * r,
                2.0 * r
            ),
            Marker::Triangle => format!(
                "<path d=\"M{:.1},{:.1}L{:.1},{:.1}L{:.1},{:.1}Z\" fill=\"#fff\" stroke=\"{color}\" stroke-width=\"1.4\"/>",
                x,
                y - r - 0.5,
                x + r,
                y + r,
                x - r,
                y + r
            ),
            Marker::Diamond => format!(
                "<path d=\"M{:.1},{:.1}L{:.1},{:.1}L{:.1},{:.1}L{:.1},{:.1}Z\" fill=\"{color}\"/>",
                x,
                y - r - 0.5,
                x + r + 0.5,
                y,
                x,
                y + r + 0.5,
                x - r - 0.5,
                y
            ),
            Marker::Cross => format!(
                "<path d=\"M{:.1},{:.1}L{:.1},{:.1}M{:.1},{:.1}L{:.1},{:.1}\" stroke=\"{color}\" stroke-width=\"1.8\"/>",
                x - r,
                y - r,
                x + r,
                y + r,
                x - r,
                y + r,
                x + r,
                y - r
            ),
            Marker::Circle => format!(
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r:.1}\" fill=\"#fff\" stroke=\"{color}\" stroke-width=\"1.4\"/>"
            ),
            Marker::Dot => {
                format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4.5\" fill=\"{color}\"/>")
            }
        }
    }
}

/// The rank's dash pattern (empty: solid) and marker.
fn rank_stroke(s: &Summary, ri: usize, rank: u32) -> (&'static str, Marker) {
    if is_straggler(s, rank) {
        ("", STRAGGLER_MARKER)
    } else {
        (DASHES[ri % DASHES.len()], MARKERS[ri % MARKERS.len()])
    }
}

fn rank_color(s: &Summary, ri: usize, rank: u32) -> &'static str {
    if is_straggler(s, rank) {
        STRAGGLER
    } else {
        color(ri)
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222;\
-webkit-print-color-adjust:exact;print-color-adjust:exact}\
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em}\
.verdict{font-size:1.15em;padding:.6em 1em;background:#f4f4f4;border-left:5px solid var(--v)}\
code{font-family:ui-monospace,monospace;background:#e8e8e8;padding:0 .25em;border-radius:3px}\
table{border-collapse:collapse;margin:.8em 0}td,th{padding:.25em .7em;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}\
th{background:#fafafa}td.l,th.l{text-align:left}\
tr.straggler td,th.straggler{background:#fde2e1;font-weight:bold}\
tr.straggler td:first-child{box-shadow:inset 5px 0 0 #d62728}\
td.key{text-decoration:underline}\
.tag{color:#fff;background:#d62728;border-radius:3px;padding:0 .35em;margin-left:.4em;font-size:.8em;font-weight:bold}\
td.slowest{font-weight:bold;outline:2px solid #d62728;outline-offset:-2px}\
.legend span{display:inline-block;margin-right:1.2em}.legend span.straggler{font-weight:bold;color:#d62728}\
.sw{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:middle}\
.note{color:#555;font-size:.9em}.mismatch{color:#a11;font-weight:bold}\
svg text{font-size:13px;font-family:system-ui,sans-serif;fill:#222}\
svg text.tick{fill:#444}svg text.value{font-size:12px}svg text.straggler{fill:#d62728;font-weight:bold}\
svg text.axis{font-size:13px;fill:#444}td.straggler{color:#d62728;font-weight:bold}\
svg{max-width:100%;height:auto}.legend svg{vertical-align:middle}\
td.h1{background:#fde9e7}td.h2{background:#fbd0cb}td.h3{background:#f6b0a8}td.h4{background:#ef8d83}td.h5{background:#e66a5f}\
@page{margin:1.5cm}\
@media print{body{margin:0;font-size:10pt;color:#000}table{font-size:8.5pt}td,th{padding:.15em .4em}td.l{white-space:normal;overflow-wrap:anywhere;min-width:14em}\
h2{break-after:avoid}svg,table,.legend,.verdict{break-inside:avoid}\
.verdict{background:none;border:1px solid #000;border-left:6px solid #000}\
tr.straggler td,th.straggler{background:#d9d9d9}tr.straggler td:first-child{box-shadow:inset 5px 0 0 #000}\
.tag{color:#000;background:none;border:1.5px solid #000}\
td.slowest{outline:2.5px solid #000}td.straggler,svg text.straggler{color:#000;fill:#000}\
td.h1{background:#eee}td.h2{background:#d8d8d8}td.h3{background:#c2c2c2}td.h4{background:#aaa}td.h5{background:#939393}\
.note{color:#333}}";

/// How many shades the per-step table uses.
const HEAT_LEVELS: usize = 5;

/// Renders the report page.
fn render(s: &Summary) -> String {
    let mut h = String::new();
    let _ = writeln!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ranktune trace summary</title>\n<style>{STYLE}</style></head><body>\n<h1>ranktune trace summary</h1>\n<p class=\"verdict\" style=\"--v:{}\">{}</p>",
        if s.straggler.is_some() { STRAGGLER } else { "#59a14f" },
        verdict_html(&s.verdict)
    );
    rank_table(&mut h, s);
    blame_chart(&mut h, s);
    step_chart(&mut h, s);
    span_chart(&mut h, s);
    step_table(&mut h, s);
    if !s.warnings.is_empty() {
        h.push_str("<h2>Warnings</h2><ul>\n");
        for w in &s.warnings {
            let _ = writeln!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("</body></html>\n");
    h
}

fn rank_table(h: &mut String, s: &Summary) {
    // The column the verdict compares is underlined.
    let key = s.straggler.as_ref().map(|x| x.method);
    let k = |m: Method| if key == Some(m) { " class=\"key\"" } else { "" };
    h.push_str("<table><tr><th>rank</th><th>steps</th><th>mean</th><th>median</th><th>p90</th><th>busy</th><th>in collectives</th><th>outside</th><th class=\"l\">file</th></tr>\n");
    let opt = |v: Option<f64>| v.map_or("-".to_string(), fmt_us);
    for r in &s.ranks {
        let slow = is_straggler(s, r.rank);
        let _ = writeln!(
            h,
            "<tr{}><td>{}{}</td><td>{}</td><td{}>{}</td><td>{}</td><td>{}</td><td{}>{}</td><td>{}</td><td{}>{}</td><td class=\"l\">{}</td></tr>",
            if slow { " class=\"straggler\"" } else { "" },
            r.rank,
            if slow { "<span class=\"tag\">straggler</span>" } else { "" },
            r.steps.len(),
            k(Method::StepTime),
            opt(r.step_mean_us),
            opt(r.step_median_us),
            opt(r.step_p90_us),
            k(Method::BusyTime),
            fmt_us(r.busy_us),
            fmt_us(r.collective_us),
            k(Method::OutsideCollectives),
            fmt_us(r.outside_collective_us()),
            esc(&r.file)
        );
    }
    h.push_str("</table>\n");
    if key == Some(Method::WaitCaused) {
        h.push_str("<p class=\"note\">The verdict compares the wait each rank caused at collectives (below).</p>\n");
    } else if key.is_some() {
        h.push_str("<p class=\"note\">Underlined: the figure the verdict compares.</p>\n");
    }
}

/// About `n` round tick values from 0 to at least `max`.
fn ticks(max: f64, n: usize) -> Vec<f64> {
    let max = max.max(1e-9);
    let raw = max / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step =
        [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(raw);
    let count = (max / step).ceil() as usize;
    (0..=count).map(|i| step * i as f64).collect()
}

/// The per-step figure the report compares: time outside collectives in a
/// synchronized job (there every step lasts equally long on every rank),
/// else the step time; and its name.
fn step_figure(s: &Summary) -> (fn(&Step) -> f64, &'static str) {
    if method_for(&s.ranks) == Method::OutsideCollectives {
        (Step::outside_collective_us, "time outside collectives")
    } else {
        (|st: &Step| st.dur_us, "step time")
    }
}

/// Per step: each rank's time, and which rank was slowest.
fn step_table(h: &mut String, s: &Summary) {
    h.push_str("<h2>Slowest rank in each step</h2>\n");
    let (fig, what) = step_figure(s);
    let mut by_step: BTreeMap<u64, Vec<Option<f64>>> = BTreeMap::new();
    for (ri, r) in s.ranks.iter().enumerate() {
        for st in &r.steps {
            by_step.entry(st.number).or_insert_with(|| vec![None; s.ranks.len()])[ri] =
                Some(fig(st));
        }
    }
    if by_step.is_empty() || s.ranks.len() < 2 {
        h.push_str(if by_step.is_empty() {
            "<p>No step markers: nothing to compare per step.</p>\n"
        } else {
            "<p>One rank: nothing to compare per step.</p>\n"
        });
        return;
    }
    let slowest_of = |row: &[Option<f64>]| -> Option<usize> {
        row.iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (i, v)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    };
    let mut wins = vec![0usize; s.ranks.len()];
    for row in by_step.values() {
        if let Some(i) = slowest_of(row) {
            wins[i] += 1;
        }
    }
    let _ = writeln!(
        h,
        "<p class=\"note\">Each cell is the rank's {what} in that step; the slowest rank of each step is outlined, and the shading grows with the time over that step's fastest rank.</p>"
    );
    h.push_str("<table class=\"steps\"><tr><th>step</th>");
    for r in &s.ranks {
        let _ = write!(h, "{}rank {}</th>", th_open(s, r), r.rank);
    }
    h.push_str("<th>slowest</th><th>slowest vs fastest</th></tr>\n");
    let _ = write!(h, "<tr><th class=\"l\">slowest in</th>");
    for (r, n) in s.ranks.iter().zip(&wins) {
        let _ = write!(h, "{}{n} of {}</th>", th_open(s, r), by_step.len());
    }
    h.push_str("<th></th><th></th></tr>\n");
    for (number, row) in by_step.iter().take(MAX_STEP_ROWS) {
        let slowest = slowest_of(row);
        let fastest = row.iter().flatten().copied().fold(f64::INFINITY, f64::min);
        let _ = write!(h, "<tr><td>{number}</td>");
        for (i, v) in row.iter().enumerate() {
            match v {
                None => h.push_str("<td>-</td>"),
                Some(v) => {
                    let over =
                        if fastest > 0.0 { (v / fastest - 1.0).clamp(0.0, 1.0) } else { 0.0 };
                    // Five steps of heat, full at +100% over the fastest
                    // rank; the stylesheet shades them (darker in print).
                    let level = (over * HEAT_LEVELS as f64).ceil() as usize;
                    let mut class = Vec::new();
                    if level > 0 {
                        class.push(format!("h{}", level.min(HEAT_LEVELS)));
                    }
                    if slowest == Some(i) {
                        class.push("slowest".to_string());
                    }
                    let class = if class.is_empty() {
                        String::new()
                    } else {
                        format!(" class=\"{}\"", class.join(" "))
                    };
                    let _ = write!(h, "<td{class}>{}</td>", esc(&fmt_us(*v)));
                }
            }
        }
        let spread = match slowest.and_then(|i| row[i]) {
            Some(v) if fastest > 0.0 => format!("+{:.0}%", (v / fastest - 1.0) * 100.0),
            _ => "-".into(),
        };
        let name = slowest.map_or("-".to_string(), |i| format!("rank {}", s.ranks[i].rank));
        let slow_class = slowest.is_some_and(|i| is_straggler(s, s.ranks[i].rank));
        let _ = writeln!(
            h,
            "<td{}>{name}</td><td>{spread}</td></tr>",
            if slow_class { " class=\"straggler\"" } else { "" }
        );
    }
    h.push_str("</table>\n");
    if by_step.len() > MAX_STEP_ROWS {
        let _ = writeln!(
            h,
            "<p class=\"note\">The first {MAX_STEP_ROWS} of {} steps; <code>--json</code> has every step time.</p>",
            by_step.len()
        );
    }
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}

/// A header cell for `r`'s column, marked when it is the straggler.
fn th_open(s: &Summary, r: &RankSummary) -> &'static str {
    if is_straggler(s, r.rank) {
        "<th class=\"straggler\">"
    } else {
        "<th>"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_maximum() {
        assert_eq!(ticks(23.1, 5), [0.0, 5.0, 10.0, 15.0, 20.0, 25.0]);
        assert_eq!(ticks(1000.0, 4), [0.0, 250.0, 500.0, 750.0, 1000.0]);
        let t = ticks(0.0, 5);
        assert!(t.len() >= 2 && t[0] == 0.0, "{t:?}");
    }

    #[test]
    fn verdict_code_spans_become_code_elements() {
        assert_eq!(
            verdict_html("goes to `aten::mm<f>` (+5 µs)"),
            "goes to <code>aten::mm&lt;f&gt;</code> (+5 µs)"
        );
        assert_eq!(verdict_html("odd ` tick"), "odd &#39; tick");
    }
}
