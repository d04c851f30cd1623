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

use super::summary::{fmt_us, method_for, Method, RankSummary, Step, Summary};
use std::collections::BTreeMap;
use std::fmt::Write;

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
svg text.axis{font-size:13px;fill:#444}td.straggler{color:#d62728;font-weight:bold}";

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

/// Most ranks drawn in the blame chart (those that caused the most wait).
const MAX_BLAME_ROWS: usize = 64;

/// Per-collective blame: per rank a bar of the wait it caused (arrived last,
/// by how much) and one of the wait it suffered, the mismatches, and the
/// worst collectives by skew.
fn blame_chart(h: &mut String, s: &Summary) {
    let c = &s.collectives;
    if c.matched == 0 && c.mismatched == 0 {
        return;
    }
    let _ = writeln!(
        h,
        "<h2>Who made whom wait: per-collective blame</h2>\n<p>{} collectives matched across ranks, {} mismatched. <b>Wait caused</b>: over the collectives where the rank arrived last, its arrival minus the second-to-last arrival. <b>Wait suffered</b>: the last arrival minus its own, summed.</p>",
        c.matched, c.mismatched
    );
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
    if c.matched == 0 {
        return;
    }
    let mut rows: Vec<usize> = (0..c.per_rank.len()).collect();
    if rows.len() > MAX_BLAME_ROWS {
        rows.sort_by(|&a, &b| {
            c.per_rank[b].wait_caused_us.total_cmp(&c.per_rank[a].wait_caused_us)
        });
        rows.truncate(MAX_BLAME_ROWS);
        rows.sort_unstable();
    }
    let max = rows
        .iter()
        .map(|&i| c.per_rank[i].wait_caused_us.max(c.per_rank[i].wait_suffered_us))
        .fold(0.0, f64::max);
    let xt = ticks(max, 5);
    let top = xt.last().copied().unwrap_or(1.0).max(1e-9);
    let (l, r, t, row, bar) = (110.0, 190.0, 30.0, 40.0, 15.0);
    let w = 1000.0;
    let pw = w - l - r;
    let ht = t + row * rows.len() as f64 + 40.0;
    let _ = writeln!(
        h,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{ht}\" role=\"img\" aria-label=\"wait caused and suffered per rank\">"
    );
    let bottom = t + row * rows.len() as f64;
    for v in &xt {
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
    for (k, &i) in rows.iter().enumerate() {
        let b = &c.per_rank[i];
        let slow = is_straggler(s, b.rank);
        let y = t + row * k as f64 + 4.0;
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
    h.push_str("</svg>\n");
    if rows.len() < c.per_rank.len() {
        let _ = writeln!(
            h,
            "<p class=\"note\">The {} ranks that caused the most wait are drawn, of {}.</p>",
            rows.len(),
            c.per_rank.len()
        );
    }
    h.push_str("<h3>Worst collectives by skew (last arrival − first)</h3>\n<table><tr><th>skew</th><th>last rank</th><th>wait caused</th><th>group</th><th>seq</th><th class=\"l\">collective</th></tr>\n");
    for w in &c.worst {
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

fn step_chart(h: &mut String, s: &Summary) {
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
    let _ = write!(
        h,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{ht}\" role=\"img\" aria-label=\"step time per iteration\">\n<rect x=\"{l}\" y=\"{t}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#bbb\"/>\n"
    );
    for v in &yticks {
        let y = t + ph - ph * v / top_v;
        let _ = writeln!(
            h,
            "<line x1=\"{l}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e4e4e4\"/><text class=\"tick\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            l + pw,
            l - 6.0,
            y + 4.0,
            esc(&fmt_us(*v))
        );
    }
    let xs = |i: usize| {
        if max_steps <= 1 {
            l + pw / 2.0
        } else {
            l + pw * i as f64 / (max_steps - 1) as f64
        }
    };
    // X ticks: the iteration numbers of the rank with the most steps, about
    // a dozen of them.
    let longest = s.ranks.iter().max_by_key(|r| r.steps.len());
    let every = max_steps.div_ceil(12).max(1);
    if let Some(longest) = longest {
        for (i, st) in longest.steps.iter().enumerate() {
            if i % every != 0 && i + 1 != max_steps {
                continue;
            }
            if i + 1 == max_steps && i % every != 0 && i % every < every / 2 {
                continue; // too close to the previous label
            }
            let x = xs(i);
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
    let _ = writeln!(
        h,
        "<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">iteration (ProfilerStep#)</text><text class=\"axis\" x=\"14\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">{what}</text>",
        l + pw / 2.0,
        ht - 8.0,
        t + ph / 2.0,
        t + ph / 2.0
    );
    // Other ranks first, the straggler on top.
    let mut order: Vec<usize> = (0..s.ranks.len()).collect();
    order.sort_by_key(|&i| is_straggler(s, s.ranks[i].rank));
    for ri in order {
        let rank = &s.ranks[ri];
        let slow = is_straggler(s, rank.rank);
        let pts: Vec<(f64, f64)> = rank
            .steps
            .iter()
            .enumerate()
            .map(|(i, st)| (xs(i), t + ph - ph * fig(st) / top_v))
            .collect();
        let text: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            h,
            "<polyline{} fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" points=\"{}\"><title>rank {}</title></polyline>",
            if slow { " class=\"straggler\"" } else { "" },
            rank_color(s, ri, rank.rank),
            if slow { 3.5 } else { 1.6 },
            text.join(" "),
            rank.rank
        );
        if pts.len() == 1 {
            let (x, y) = pts[0];
            let _ = writeln!(
                h,
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"{}\"/>",
                rank_color(s, ri, rank.rank)
            );
        }
    }
    // The straggler's line is labeled at its end, on the chart itself.
    if let Some((ri, rank)) = s.ranks.iter().enumerate().find(|(_, r)| is_straggler(s, r.rank)) {
        if let Some(last) = rank.steps.last() {
            let x = xs(rank.steps.len() - 1);
            let y = t + ph - ph * fig(last) / top_v;
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
    h.push_str("</svg>\n");
    legend_ranks(h, s);
}

fn legend_ranks(h: &mut String, s: &Summary) {
    h.push_str("<div class=\"legend\">");
    for (ri, rank) in s.ranks.iter().enumerate() {
        let slow = is_straggler(s, rank.rank);
        let _ = write!(
            h,
            "<span{}><i class=\"sw\" style=\"background:{}\"></i>rank {}{}</span>",
            if slow { " class=\"straggler\"" } else { "" },
            rank_color(s, ri, rank.rank),
            rank.rank,
            if slow { " (straggler)" } else { "" }
        );
    }
    h.push_str("</div>\n");
}

fn span_chart(h: &mut String, s: &Summary) {
    h.push_str("<h2>Where the time goes: top spans by self time, per rank</h2>\n");
    // The names that matter most across ranks.
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
    let names: Vec<&str> = totals.iter().map(|(n, _)| n.as_str()).collect();
    let per_rank: Vec<Vec<f64>> = s
        .ranks
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
        .collect();
    let max = per_rank.iter().map(|v| v.iter().sum::<f64>()).fold(0.0, f64::max);
    let xticks = ticks(max, 6);
    let top_v = xticks.last().copied().unwrap_or(1.0).max(1e-9);
    let (w, l, r, bar, gap, t) = (1000.0, 150.0, 90.0, 26.0, 10.0, 8.0);
    let pw = w - l - r;
    let rows_h = (bar + gap) * s.ranks.len() as f64;
    let ht = t + rows_h + 44.0;
    let _ = writeln!(
        h,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{ht}\" role=\"img\" aria-label=\"top spans per rank\">"
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
    for (ri, (rank, v)) in s.ranks.iter().zip(&per_rank).enumerate() {
        let slow = is_straggler(s, rank.rank);
        let y = t + (bar + gap) * ri as f64;
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
            rank.rank,
            if slow { " (straggler)" } else { "" }
        );
        let mut x = l;
        for (k, val) in v.iter().enumerate() {
            let width = pw * val / top_v;
            if width <= 0.0 {
                continue;
            }
            let label = names.get(k).copied().unwrap_or("(other)");
            let fill = if k < names.len() { color(k) } else { "#ddd" };
            let _ = write!(
                h,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{width:.1}\" height=\"{bar}\" fill=\"{fill}\"{}><title>{}: {}</title></rect>",
                if slow { " stroke=\"#d62728\" stroke-width=\"1.5\"" } else { "" },
                esc(label),
                esc(&fmt_us(*val))
            );
            // The segment's value, where it fits.
            let text = fmt_us(*val);
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
        h.push('\n');
    }
    h.push_str("</svg>\n<div class=\"legend\">");
    for (k, n) in names.iter().enumerate() {
        let _ = write!(
            h,
            "<span><i class=\"sw\" style=\"background:{}\"></i>{}</span>",
            color(k),
            esc(n)
        );
    }
    h.push_str("<span><i class=\"sw\" style=\"background:#ddd\"></i>(other)</span></div>\n");
    // The numbers behind the bars, also for segments too narrow to label.
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
        for (r, v) in s.ranks.iter().zip(&per_rank) {
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
                    // White to red, full at +100% over the fastest rank.
                    let shade = (255.0 - over * 120.0).round() as u8;
                    let _ = write!(
                        h,
                        "<td{} style=\"background:rgb(255,{shade},{shade})\">{}</td>",
                        if slowest == Some(i) { " class=\"slowest\"" } else { "" },
                        esc(&fmt_us(*v))
                    );
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
