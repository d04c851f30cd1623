//! The report's per-collective blame: the mismatches, per rank a bar of
//! the wait it caused (arrived last, by how much) and one of the wait it
//! suffered, and the worst collectives by skew.

use super::{esc, is_straggler, ticks, verdict_html, STRAGGLER};
use crate::collectives::{Collectives, RankBlame};
use crate::summary::{fmt_us, Summary};
use std::fmt::Write;

/// Most ranks drawn in the blame chart (those that caused the most wait).
const MAX_BLAME_ROWS: usize = 64;

/// The chart's geometry: left and right margins, top, row height, bar
/// height and width.
const L: f64 = 110.0;
const R: f64 = 190.0;
const T: f64 = 30.0;
const ROW: f64 = 40.0;
const BAR: f64 = 15.0;
const W: f64 = 1000.0;

/// Per-collective blame: the explanation and the mismatches, then (with
/// matched collectives) the bars and the worst collectives.
pub(super) fn blame_chart(h: &mut String, s: &Summary) {
    let c = &s.collectives;
    if c.matched == 0 && c.mismatched == 0 {
        return;
    }
    let _ = writeln!(
        h,
        "<h2>Who made whom wait: per-collective blame</h2>\n<p>{} collectives matched across ranks, {} mismatched. <b>Wait caused</b>: over the collectives where the rank arrived last, its arrival minus the second-to-last arrival. <b>Wait suffered</b>: the last arrival minus its own, summed.</p>",
        c.matched, c.mismatched
    );
    mismatches(h, c);
    if c.matched == 0 {
        return;
    }
    let rows = rows(c);
    bars(h, s, &rows);
    if rows.len() < c.per_rank.len() {
        let _ = writeln!(
            h,
            "<p class=\"note\">The {} ranks that caused the most wait are drawn, of {}.</p>",
            rows.len(),
            c.per_rank.len()
        );
    }
    worst_table(h, s);
}

/// One line per group whose ranks diverge.
fn mismatches(h: &mut String, c: &Collectives) {
    for m in &c.mismatches {
        let _ = writeln!(
            h,
            "<p class=\"mismatch\">Mismatch{} at {} {}: {}</p>",
            m.group.as_ref().map_or(String::new(), |g| format!(" in group {}", esc(g))),
            if m.by_seq { "Seq" } else { "position" },
            m.position,
            verdict_html(&m.detail)
        );
    }
}

/// The ranks drawn, in rank order: all, or the [`MAX_BLAME_ROWS`] that
/// caused the most wait.
fn rows(c: &Collectives) -> Vec<usize> {
    let mut rows: Vec<usize> = (0..c.per_rank.len()).collect();
    if rows.len() > MAX_BLAME_ROWS {
        rows.sort_by(|&a, &b| {
            c.per_rank[b].wait_caused_us.total_cmp(&c.per_rank[a].wait_caused_us)
        });
        rows.truncate(MAX_BLAME_ROWS);
        rows.sort_unstable();
    }
    rows
}

/// The chart: the time axis, the legend, then two bars per rank drawn.
fn bars(h: &mut String, s: &Summary, rows: &[usize]) {
    let c = &s.collectives;
    let max = rows
        .iter()
        .map(|&i| c.per_rank[i].wait_caused_us.max(c.per_rank[i].wait_suffered_us))
        .fold(0.0, f64::max);
    let xt = ticks(max, 5);
    let top = xt.last().copied().unwrap_or(1.0).max(1e-9);
    let pw = W - L - R;
    let ht = T + ROW * rows.len() as f64 + 40.0;
    let _ = writeln!(
        h,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{ht}\" viewBox=\"0 0 {W} {ht}\" role=\"img\" aria-label=\"wait caused and suffered per rank\">"
    );
    let bottom = T + ROW * rows.len() as f64;
    axis(h, &xt, top, pw, bottom);
    for (k, &i) in rows.iter().enumerate() {
        rank_bars(h, s, &c.per_rank[i], T + ROW * k as f64 + 4.0, (pw, top));
    }
    h.push_str("</svg>\n");
}

/// Grid lines with tick labels, the legend and the axis name.
fn axis(h: &mut String, xt: &[f64], top: f64, pw: f64, bottom: f64) {
    let (l, t) = (L, T);
    for v in xt {
        let x = l + pw * v / top;
        let _ = writeln!(
            h,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{t}\" y2=\"{bottom}\" stroke=\"#e4e4e4\"/><text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            bottom + 16.0,
            esc(&fmt_us(*v))
        );
    }
    let _ = writeln!(
        h,
        "<rect x=\"{l}\" y=\"8\" width=\"12\" height=\"12\" fill=\"{STRAGGLER}\"/><text x=\"{}\" y=\"18\">wait caused</text><rect x=\"{}\" y=\"8\" width=\"12\" height=\"12\" fill=\"#9aa5b1\"/><text x=\"{}\" y=\"18\">wait suffered</text><text class=\"axis\" x=\"{}\" y=\"{:.1}\" text-anchor=\"middle\">time (sum over matched collectives)</text>",
        l + 16.0,
        l + 120.0,
        l + 136.0,
        l + pw / 2.0,
        bottom + 34.0
    );
}

/// One rank's label, its wait-caused bar and its wait-suffered bar, at
/// height `y`; `(pw, top)`: the plot's width in pixels stands for `top` µs.
fn rank_bars(h: &mut String, s: &Summary, b: &RankBlame, y: f64, (pw, top): (f64, f64)) {
    let (l, bar) = (L, BAR);
    let slow = is_straggler(s, b.rank);
    let cls = if slow { " class=\"straggler\"" } else { "" };
    let _ = writeln!(
        h,
        "<text{cls} x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">rank {}</text>",
        l - 8.0,
        y + bar + 3.0,
        b.rank
    );
    let wc = pw * b.wait_caused_us / top;
    let ws = pw * b.wait_suffered_us / top;
    let _ = writeln!(
        h,
        "<rect{cls} x=\"{l}\" y=\"{y:.1}\" width=\"{wc:.1}\" height=\"{bar}\" fill=\"{}\"{}/><text class=\"value\" x=\"{:.1}\" y=\"{:.1}\">caused {} · last {}×</text>",
        if slow { STRAGGLER } else { "#e8868a" },
        if slow { " stroke=\"#000\" stroke-width=\"1.5\"" } else { "" },
        l + wc + 5.0,
        y + 12.0,
        esc(&fmt_us(b.wait_caused_us)),
        b.last_count
    );
    let _ = writeln!(
        h,
        "<rect x=\"{l}\" y=\"{:.1}\" width=\"{ws:.1}\" height=\"{:.1}\" fill=\"#9aa5b1\"/><text class=\"value\" x=\"{:.1}\" y=\"{:.1}\">suffered {}</text>",
        y + bar + 2.0,
        bar - 4.0,
        l + ws + 5.0,
        y + bar + 11.0,
        esc(&fmt_us(b.wait_suffered_us))
    );
}

/// The matched collectives with the largest skew.
fn worst_table(h: &mut String, s: &Summary) {
    h.push_str("<h3>Worst collectives by skew (last arrival − first)</h3>\n<table><tr><th>skew</th><th>last rank</th><th>wait caused</th><th>group</th><th>seq</th><th class=\"l\">collective</th></tr>\n");
    for w in &s.collectives.worst {
        let slow = is_straggler(s, w.last_rank);
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td{}>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\"><code>{}</code></td></tr>",
            esc(&fmt_us(w.skew_us)),
            if slow { " class=\"straggler\"" } else { "" },
            w.last_rank,
            esc(&fmt_us(w.caused_us)),
            esc(w.group.as_deref().unwrap_or("-")),
            w.seq,
            esc(&w.name)
        );
    }
    h.push_str("</table>\n");
}
