//! Progress of `ranktune tune` on the terminal: a bar for one rank (or, for
//! a child rank, the protocol's progress lines for its launcher instead), and
//! the launcher's bar over all its ranks, with the ranks' other stderr lines
//! printed above it as `[rank N] …`.
//!
//! Presentation only: the protocol itself is `ranktune_tune`'s, this module
//! only draws what it reports.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ranktune_launch::{JobProgress, LaunchObserver, ProgressWriter};

/// One rank's progress: a bar on a terminal, lines for a launcher, nothing
/// otherwise.
pub(super) struct Progress {
    bar: ProgressBar,
    child: Option<ProgressWriter<std::io::Stderr>>,
}

impl Progress {
    /// Progress over `total` buckets; `child`: this rank was started by
    /// `--ranks` and reports to its launcher.
    pub(super) fn new(total: u64, child: bool) -> Self {
        let bar = if child {
            ProgressBar::hidden()
        } else {
            ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
        };
        bar.set_style(bar_style());
        let child = child.then(|| ProgressWriter::stderr(total));
        Progress { bar, child }
    }

    /// One more bucket done; `what` names it.
    pub(super) fn step(&mut self, what: &str) {
        self.bar.set_message(what.to_string());
        self.bar.inc(1);
        if let Some(w) = &mut self.child {
            w.step();
        }
    }

    /// Removes the bar.
    pub(super) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// The launcher's bar: the buckets of all ranks.
pub(super) struct LaunchBar {
    bar: ProgressBar,
}

impl LaunchBar {
    /// An empty bar for `ranks` ranks (its length grows as ranks report).
    pub(super) fn new(ranks: u32) -> Self {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        bar.set_style(bar_style());
        bar.set_message(format!("{ranks} ranks"));
        LaunchBar { bar }
    }
}

/// Clears the bar also when the launch stops early (a rank that could not start).
impl Drop for LaunchBar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

impl LaunchObserver for LaunchBar {
    fn progress(&mut self, p: JobProgress) {
        self.bar.set_length(p.total);
        self.bar.set_position(p.done);
    }

    fn line(&mut self, rank: u32, line: &str) {
        self.bar.suspend(|| eprintln!("[rank {rank}] {line}"));
    }

    fn finished(&mut self) {
        self.bar.finish_and_clear();
    }
}

fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:32} {pos}/{len} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
}
