//! Progress bars on stderr (hidden with `--quiet` or when stderr is not a terminal).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use privopt_sim::context::Progress;

/// An indicatif bar behind [`Progress`].
pub struct Bar {
    bar: ProgressBar,
}

impl Bar {
    /// A bar, hidden when `quiet`.
    pub fn new(quiet: bool) -> Self {
        let bar = ProgressBar::hidden();
        if !quiet {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        Self { bar }
    }
}

impl Progress for Bar {
    fn start(&self, label: &str, total: u64) {
        self.bar.reset();
        self.bar.set_length(total);
        if let Ok(style) = ProgressStyle::with_template(
            "{prefix:>12} [{bar:40}] {pos}/{len} {elapsed_precise} eta {eta}",
        ) {
            self.bar.set_style(style.progress_chars("=> "));
        }
        self.bar.set_prefix(label.to_owned());
    }
    fn advance(&self, n: u64) {
        self.bar.inc(n);
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
