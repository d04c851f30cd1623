//! The report's span chart: per rank a stacked bar of its top spans by self
//! time (the names that matter most across ranks, the rest as "(other)"),
//! the legend of names, and the table of the numbers behind the bars.

use super::{color, esc, is_straggler, th_open, ticks};
use crate::summary::{fmt_us, Summary};
use std::fmt::Write;

/// The chart's geometry: width, left and right margins, bar height, gap
/// between bars, top margin.
const W: f64 = 1000.0;
const L: f64 = 150.0;
const R: f64 = 90.0;
const BAR: f64 = 26.0;
const GAP: f64 = 10.0;
const T: f64 = 8.0;

/// The span chart: bars, legend and table.
pub(super) fn span_chart(h: &mut String, s: &Summary) {
    h.push_str("<h2>Where the time goes: top spans by self time, per rank</h2>\n");
    let totals = top_names(s);
    let names: Vec<&str> = totals.iter().map(|(n, _)| n.as_str()).collect();
    let per_rank = segments(s, &names);
    bars(h, s, &names, &per_rank);
    legend(h, &names);
    table(h, s, &names, &per_rank);
}

/// The names that matter most across ranks: the nine with the most self
/// time summed over each rank's top 50.
fn top_names(s: &Summary) -> Vec<(String, f64)> {
    let mut totals: Vec<(String, f64)> = Vec::new();
    for r in &s.ranks {
        for sp in r.spans.iter().take(50) {
            match totals.iter_mut().find(|(n, _)| *n == sp.name) {
                Some(e) => e.1 += sp.self_us,
                None => totals.push((sp.name.clone(), sp.self_us)),
            }
        }
    }
    totals.sort_by(|a, b| b.1.total_cmp(&a.1));
    totals.truncate(9);
    totals
}

/// Per rank, the self time of each of `names` and then of all the others.
fn segments(s: &Summary, names: &[&str]) -> Vec<Vec<f64>> {
    s.ranks
        .iter()
        .map(|r| {
            let mut v: Vec<f64> = names
                .iter()
                .map(|n| r.spans.iter().find(|sp| sp.name == *n).map_or(0.0, |sp| sp.self_us))
                .collect();
            let all: f64 = r.spans.iter().map(|sp| sp.self_us).sum();
            v.push((all - v.iter().sum::<f64>()).max(0.0));
            v
        })
        .collect()
}

/// The chart: the time axis, then one stacked bar per rank.
fn bars(h: &mut String, s: &Summary, names: &[&str], per_rank: &[Vec<f64>]) {
    let max = per_rank.iter().map(|v| v.iter().sum::<f64>()).fold(0.0, f64::max);
    let xticks = ticks(max, 6);
    let top_v = xticks.last().copied().unwrap_or(1.0).max(1e-9);
    let (w, l, t) = (W, L, T);
    let pw = w - l - R;
    let rows_h = (BAR + GAP) * s.ranks.len() as f64;
    let ht = t + rows_h + 44.0;
    let _ = writeln!(
        h,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{ht}\" viewBox=\"0 0 {w} {ht}\" role=\"img\" aria-label=\"top spans per rank\">"
    );
    // X axis: grid lines and tick labels.
    let axis_y = t + rows_h;
    for v in &xticks {
        let x = l + pw * v / top_v;
        let _ = writeln!(
            h,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{t}\" y2=\"{:.1}\" stroke=\"#e4e4e4\"/><text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            axis_y + 4.0,
            axis_y + 18.0,
            esc(&fmt_us(*v))
        );
    }
    let _ = writeln!(
        h,
        "<line x1=\"{l}\" x2=\"{}\" y1=\"{axis_y:.1}\" y2=\"{axis_y:.1}\" stroke=\"#999\"/><text class=\"axis\" x=\"{}\" y=\"{:.1}\" text-anchor=\"middle\">self time, whole trace</text>",
        l + pw,
        l + pw / 2.0,
        axis_y + 36.0
    );
    for (ri, (rank, v)) in s.ranks.iter().zip(per_rank).enumerate() {
        let slow = is_straggler(s, rank.rank);
        let y = t + (BAR + GAP) * ri as f64;
        rank_bar(h, rank.rank, slow, names, v, y, (pw, top_v));
        h.push('\n');
    }
    h.push_str("</svg>\n");
}

/// One rank's row at height `y`: its band (the straggler's), its label,
/// its segments and its total; `(pw, top_v)`: the plot's width in pixels
/// stands for `top_v` µs.
fn rank_bar(
    h: &mut String,
    rank: u32,
    slow: bool,
    names: &[&str],
    v: &[f64],
    y: f64,
    (pw, top_v): (f64, f64),
) {
    let (w, l, bar, gap) = (W, L, BAR, GAP);
    if slow {
        let _ = write!(
            h,
            "<rect class=\"straggler\" x=\"2\" y=\"{:.1}\" width=\"{}\" height=\"{}\" fill=\"#fde2e1\"/>",
            y - gap / 2.0,
            w - 4.0,
            bar + gap
        );
    }
    let _ = write!(
        h,
        "<text{} x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">rank {}{}</text>",
        if slow { " class=\"straggler\"" } else { "" },
        l - 8.0,
        y + bar * 0.68,
        rank,
        if slow { " (straggler)" } else { "" }
    );
    let mut x = l;
    for (k, val) in v.iter().enumerate() {
        let width = pw * val / top_v;
        if width <= 0.0 {
            continue;
        }
        segment(h, slow, names, k, *val, (x, y, width));
        x += width;
    }
    let total: f64 = v.iter().sum();
    let _ = write!(
        h,
        "<text class=\"value{}\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
        if slow { " straggler" } else { "" },
        x + 6.0,
        y + bar * 0.68,
        esc(&fmt_us(total))
    );
}

/// Segment `k` (of `names`, else "(other)") of a bar at `(x, y)`, `width`
/// pixels for `val` µs, with its value printed where it fits.
fn segment(
    h: &mut String,
    slow: bool,
    names: &[&str],
    k: usize,
    val: f64,
    (x, y, width): (f64, f64, f64),
) {
    let bar = BAR;
    let label = names.get(k).copied().unwrap_or("(other)");
    let fill = if k < names.len() { color(k) } else { "#ddd" };
    let _ = write!(
        h,
        "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{width:.1}\" height=\"{bar}\" fill=\"{fill}\"{}><title>{}: {}</title></rect>",
        if slow { " stroke=\"#d62728\" stroke-width=\"1.5\"" } else { "" },
        esc(label),
        esc(&fmt_us(val))
    );
    let text = fmt_us(val);
    if width >= 9.0 * text.chars().count() as f64 {
        let light = k < names.len()
            && !matches!(fill, "#edc948" | "#76b7b2" | "#ff9da7" | "#bab0ac" | "#86bcb6");
        let _ = write!(
            h,
            "<text class=\"value\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" style=\"fill:{}\">{}</text>",
            x + width / 2.0,
            y + bar * 0.68,
            if light { "#fff" } else { "#222" },
            esc(&text)
        );
    }
}

/// The names' colors.
fn legend(h: &mut String, names: &[&str]) {
    h.push_str("<div class=\"legend\">");
    for (k, n) in names.iter().enumerate() {
        let _ = write!(
            h,
            "<span><i class=\"sw\" style=\"background:{}\"></i>{}</span>",
            color(k),
            esc(n)
        );
    }
    h.push_str("<span><i class=\"sw\" style=\"background:#ddd\"></i>(other)</span></div>\n");
}

/// The numbers behind the bars, also for segments too narrow to label.
fn table(h: &mut String, s: &Summary, names: &[&str], per_rank: &[Vec<f64>]) {
    h.push_str("<table class=\"spans\"><tr><th class=\"l\">span (self time)</th>");
    for r in &s.ranks {
        let _ = write!(h, "{}rank {}</th>", th_open(s, r), r.rank);
    }
    h.push_str("</tr>\n");
    for (k, name) in names.iter().copied().chain(["(other)"]).enumerate() {
        let fill = if k < names.len() { color(k) } else { "#ddd" };
        let _ = write!(
            h,
            "<tr><td class=\"l\"><i class=\"sw\" style=\"background:{fill}\"></i>{}</td>",
            esc(name)
        );
        for (r, v) in s.ranks.iter().zip(per_rank) {
            let slow = is_straggler(s, r.rank);
            let _ = write!(
                h,
                "<td{}>{}</td>",
                if slow { " class=\"straggler\"" } else { "" },
                esc(&fmt_us(v.get(k).copied().unwrap_or(0.0)))
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}
