//! The report's step chart: per rank, a line of its per-step figure (step
//! time, or time outside collectives in a synchronized job) over the
//! iterations, the straggler's on top and labeled, and the legend of ranks.

use super::{capitalized, esc, is_straggler, rank_color, rank_stroke, step_figure, ticks};
use crate::summary::{fmt_us, Step, Summary};
use std::fmt::Write;

/// The chart's frame: the plot area inside the margins, and the scales.
struct Plot {
    /// Left margin, top margin, plot width and height, pixels.
    l: f64,
    t: f64,
    pw: f64,
    ph: f64,
    /// The most steps of any rank.
    max_steps: usize,
    /// The figure at the top of the y axis, µs.
    top_v: f64,
}

impl Plot {
    /// The x of step `i`.
    fn x(&self, i: usize) -> f64 {
        if self.max_steps <= 1 {
            self.l + self.pw / 2.0
        } else {
            self.l + self.pw * i as f64 / (self.max_steps - 1) as f64
        }
    }

    /// The y of figure `v`.
    fn y(&self, v: f64) -> f64 {
        self.t + self.ph - self.ph * v / self.top_v
    }
}

/// The step chart, or a note that there are no steps.
pub(super) fn step_chart(h: &mut String, s: &Summary) {
    let (fig, what) = step_figure(s);
    let _ = writeln!(h, "<h2>{} per iteration</h2>", capitalized(what));
    let max_steps = s.ranks.iter().map(|r| r.steps.len()).max().unwrap_or(0);
    if max_steps == 0 {
        h.push_str(
            "<p>No step markers (<code>ProfilerStep#N</code>) in these traces: spans only.</p>\n",
        );
        return;
    }
    let max_t = s.ranks.iter().flat_map(|r| r.steps.iter().map(fig)).fold(0.0, f64::max);
    let yticks = ticks(max_t, 5);
    let top_v = yticks.last().copied().unwrap_or(1.0).max(1e-9);
    let (w, ht, l, b, t, r) = (1000.0, 340.0, 80.0, 48.0, 12.0, 80.0);
    let pw = w - l - r;
    let ph = ht - t - b;
    let p = Plot { l, t, pw, ph, max_steps, top_v };
    let _ = write!(
        h,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{ht}\" viewBox=\"0 0 {w} {ht}\" role=\"img\" aria-label=\"step time per iteration\">\n<rect x=\"{l}\" y=\"{t}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#bbb\"/>\n"
    );
    y_axis(h, &p, &yticks);
    x_axis(h, &p, s);
    let _ = writeln!(
        h,
        "<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">iteration (ProfilerStep#)</text><text class=\"axis\" x=\"14\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">{what}</text>",
        l + pw / 2.0,
        ht - 8.0,
        t + ph / 2.0,
        t + ph / 2.0
    );
    lines(h, &p, s, fig);
    straggler_label(h, &p, s, fig);
    h.push_str("</svg>\n");
    legend_ranks(h, s);
}

/// Grid lines with the figure's tick labels.
fn y_axis(h: &mut String, p: &Plot, yticks: &[f64]) {
    for v in yticks {
        let y = p.y(*v);
        let _ = writeln!(
            h,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e4e4e4\"/><text class=\"tick\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            p.l,
            p.l + p.pw,
            p.l - 6.0,
            y + 4.0,
            esc(&fmt_us(*v))
        );
    }
}

/// X ticks: the iteration numbers of the rank with the most steps, about
/// a dozen of them.
fn x_axis(h: &mut String, p: &Plot, s: &Summary) {
    let Some(longest) = s.ranks.iter().max_by_key(|r| r.steps.len()) else { return };
    let (max_steps, t, ph) = (p.max_steps, p.t, p.ph);
    let every = max_steps.div_ceil(12).max(1);
    for (i, st) in longest.steps.iter().enumerate() {
        if i % every != 0 && i + 1 != max_steps {
            continue;
        }
        if i + 1 == max_steps && i % every != 0 && i % every < every / 2 {
            continue; // too close to the previous label
        }
        let x = p.x(i);
        let _ = writeln!(
            h,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{}\" y2=\"{}\" stroke=\"#999\"/><text class=\"tick\" x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            t + ph,
            t + ph + 5.0,
            t + ph + 19.0,
            st.number
        );
    }
}

/// One line per rank: the other ranks first, the straggler on top.
fn lines(h: &mut String, p: &Plot, s: &Summary, fig: fn(&Step) -> f64) {
    let mut order: Vec<usize> = (0..s.ranks.len()).collect();
    order.sort_by_key(|&i| is_straggler(s, s.ranks[i].rank));
    for ri in order {
        let rank = &s.ranks[ri];
        let slow = is_straggler(s, rank.rank);
        let pts: Vec<(f64, f64)> =
            rank.steps.iter().enumerate().map(|(i, st)| (p.x(i), p.y(fig(st)))).collect();
        let text: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let (dash, marker) = rank_stroke(s, ri, rank.rank);
        let color = rank_color(s, ri, rank.rank);
        let dash =
            if dash.is_empty() { String::new() } else { format!(" stroke-dasharray=\"{dash}\"") };
        let _ = writeln!(
            h,
            "<polyline{} fill=\"none\" stroke=\"{color}\" stroke-width=\"{}\"{dash} points=\"{}\"><title>rank {}</title></polyline>",
            if slow { " class=\"straggler\"" } else { "" },
            if slow { 3.5 } else { 1.6 },
            text.join(" "),
            rank.rank
        );
        // A marker on every point (every few on a long run), so the lines
        // are told apart in greyscale too.
        let every = pts.len().div_ceil(MAX_MARKERS).max(1);
        for (x, y) in pts.iter().step_by(every) {
            h.push_str(&marker.svg(*x, *y, color));
        }
        h.push('\n');
    }
}

/// The most markers one line gets.
const MAX_MARKERS: usize = 40;

/// The straggler's line is labeled at its end, on the chart itself.
fn straggler_label(h: &mut String, p: &Plot, s: &Summary, fig: fn(&Step) -> f64) {
    let Some((ri, rank)) = s.ranks.iter().enumerate().find(|(_, r)| is_straggler(s, r.rank)) else {
        return;
    };
    if let Some(last) = rank.steps.last() {
        let x = p.x(rank.steps.len() - 1);
        let y = p.y(fig(last));
        let _ = writeln!(
            h,
            "<text class=\"straggler\" x=\"{:.1}\" y=\"{:.1}\" fill=\"{}\">rank {}</text>",
            x + 6.0,
            y + 4.0,
            rank_color(s, ri, rank.rank),
            rank.rank
        );
    }
}

/// The ranks' colors, the straggler marked.
fn legend_ranks(h: &mut String, s: &Summary) {
    h.push_str("<div class=\"legend\">");
    for (ri, rank) in s.ranks.iter().enumerate() {
        let slow = is_straggler(s, rank.rank);
        let (dash, marker) = rank_stroke(s, ri, rank.rank);
        let color = rank_color(s, ri, rank.rank);
        // The legend shows each rank's line as drawn: color, dashes, marker.
        let _ = write!(
            h,
            "<span{}><svg class=\"key\" width=\"34\" height=\"12\" viewBox=\"0 0 34 12\" aria-hidden=\"true\"><line x1=\"1\" x2=\"33\" y1=\"6\" y2=\"6\" stroke=\"{color}\" stroke-width=\"{}\" stroke-dasharray=\"{dash}\"/>{}</svg> rank {}{}</span>",
            if slow { " class=\"straggler\"" } else { "" },
            if slow { 3.5 } else { 1.6 },
            marker.svg(17.0, 6.0, color),
            rank.rank,
            if slow { " (straggler)" } else { "" }
        );
    }
    h.push_str("</div>\n");
}
