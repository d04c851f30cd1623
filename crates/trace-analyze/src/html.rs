//! The `--html` report: one self-contained page (inline CSS and SVG, no
//! scripts, no network) with the verdict, per-rank step time over the
//! iterations, and per-rank stacked bars of the top spans by self time.
//! It only renders a [`Summary`]; it computes nothing of its own.

use super::summary::{fmt_us, Summary};
use std::fmt::Write;

const COLORS: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

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

fn color(i: usize) -> &'static str {
    COLORS[i % COLORS.len()]
}

impl Summary {
    /// The `--html` report: one self-contained page (inline CSS and SVG, no
    /// scripts, no network) with the verdict, the step times and the top
    /// spans of every rank.
    pub fn to_html(&self) -> String {
        render(self)
    }
}

/// Renders the report page.
fn render(s: &Summary) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ranktune trace summary</title>\n<style>body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}h1{{font-size:1.4em}}.verdict{{font-size:1.15em;padding:.6em 1em;background:#f4f4f4;border-left:4px solid {};}}table{{border-collapse:collapse;margin:1em 0}}td,th{{padding:.2em .7em;border-bottom:1px solid #ddd;text-align:right}}th{{background:#fafafa}}td.l,th.l{{text-align:left}}.legend span{{display:inline-block;margin-right:1em}}.sw{{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:middle}}svg text{{font-size:11px;font-family:system-ui,sans-serif}}</style></head><body>\n<h1>ranktune trace summary</h1>\n<p class=\"verdict\">{}</p>\n",
        if s.straggler.is_some() { "#e15759" } else { "#59a14f" },
        esc(&s.verdict)
    );
    // Table.
    h.push_str("<table><tr><th>rank</th><th>steps</th><th>mean</th><th>median</th><th>p90</th><th>busy</th><th>in collectives</th><th>outside</th><th class=\"l\">file</th></tr>\n");
    let opt = |v: Option<f64>| v.map_or("-".to_string(), fmt_us);
    for r in &s.ranks {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            r.rank,
            r.steps.len(),
            opt(r.step_mean_us),
            opt(r.step_median_us),
            opt(r.step_p90_us),
            fmt_us(r.busy_us),
            fmt_us(r.collective_us),
            fmt_us(r.outside_collective_us()),
            esc(&r.file)
        );
    }
    h.push_str("</table>\n");
    step_chart(&mut h, s);
    span_chart(&mut h, s);
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

fn step_chart(h: &mut String, s: &Summary) {
    h.push_str("<h2>Step time per iteration</h2>\n");
    let max_steps = s.ranks.iter().map(|r| r.steps.len()).max().unwrap_or(0);
    if max_steps == 0 {
        h.push_str(
            "<p>No step markers (<code>ProfilerStep#N</code>) in these traces: spans only.</p>\n",
        );
        return;
    }
    let max_t =
        s.ranks.iter().flat_map(|r| r.steps.iter().map(|x| x.dur_us)).fold(0.0, f64::max).max(1.0);
    let (w, ht, l, b, t, r) = (760.0, 300.0, 70.0, 30.0, 10.0, 10.0);
    let pw = w - l - r;
    let ph = ht - t - b;
    let _ = write!(
        h,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{ht}\" role=\"img\" aria-label=\"step time per iteration\">\n<rect x=\"{l}\" y=\"{t}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#ccc\"/>\n"
    );
    for k in 0..=4 {
        let v = max_t * f64::from(k) / 4.0;
        let y = t + ph - ph * f64::from(k) / 4.0;
        let _ = write!(
            h,
            "<line x1=\"{l}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            l + pw,
            l - 5.0,
            y + 4.0,
            esc(&fmt_us(v))
        );
    }
    let _ = write!(
        h,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">iteration</text>",
        l + pw / 2.0,
        ht - 8.0
    );
    let xs = |i: usize| {
        if max_steps <= 1 {
            l + pw / 2.0
        } else {
            l + pw * i as f64 / (max_steps - 1) as f64
        }
    };
    for (ri, rank) in s.ranks.iter().enumerate() {
        let pts: Vec<String> = rank
            .steps
            .iter()
            .enumerate()
            .map(|(i, st)| format!("{:.1},{:.1}", xs(i), t + ph - ph * st.dur_us / max_t))
            .collect();
        let _ = writeln!(
            h,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"><title>rank {}</title></polyline>",
            color(ri),
            pts.join(" "),
            rank.rank
        );
    }
    h.push_str("</svg>\n<div class=\"legend\">");
    for (ri, rank) in s.ranks.iter().enumerate() {
        let _ = write!(
            h,
            "<span><i class=\"sw\" style=\"background:{}\"></i>rank {}</span>",
            color(ri),
            rank.rank
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
    let max = per_rank.iter().map(|v| v.iter().sum::<f64>()).fold(0.0, f64::max).max(1.0);
    let (w, l, bar, gap) = (760.0, 70.0, 22.0, 8.0);
    let ht = 20.0 + (bar + gap) * s.ranks.len() as f64;
    let pw = w - l - 10.0;
    let _ = writeln!(
        h,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{ht}\" role=\"img\" aria-label=\"top spans per rank\">"
    );
    for (ri, (rank, v)) in s.ranks.iter().zip(&per_rank).enumerate() {
        let y = 10.0 + (bar + gap) * ri as f64;
        let _ = write!(
            h,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">rank {}</text>",
            l - 6.0,
            y + bar * 0.7,
            rank.rank
        );
        let mut x = l;
        for (k, val) in v.iter().enumerate() {
            let width = pw * val / max;
            if width <= 0.0 {
                continue;
            }
            let label = names.get(k).copied().unwrap_or("(other)");
            let fill = if k < names.len() { color(k) } else { "#ddd" };
            let _ = write!(
                h,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{width:.1}\" height=\"{bar}\" fill=\"{fill}\"><title>{}: {}</title></rect>",
                esc(label),
                esc(&fmt_us(*val))
            );
            x += width;
        }
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
}
