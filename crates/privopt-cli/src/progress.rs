//! Progress on stderr: a bar on a terminal; elsewhere (a log file, a pipe, CI) a plain line
//! at the start, every half minute and at the end, so an hour-long run redirected to a file
//! still says how far it is. Nothing with `--quiet`.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use privopt_sim::context::Progress;

/// How often a plain progress line is written at most.
const LINE_EVERY: Duration = Duration::from_secs(30);

/// An indicatif bar, or plain lines, behind [`Progress`].
pub struct Bar {
    bar: ProgressBar,
    /// Set when stderr is not a terminal (the bar would draw nothing there).
    lines: Option<Mutex<Lines>>,
}

impl Bar {
    /// A bar on a terminal, plain lines elsewhere; silent when `quiet`.
    pub fn new(quiet: bool) -> Self {
        let bar = ProgressBar::hidden();
        let terminal = std::io::stderr().is_terminal();
        if !quiet && terminal {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        Self {
            bar,
            lines: (!quiet && !terminal).then(|| Mutex::new(Lines::new(Instant::now()))),
        }
    }

    /// Runs `f` on the line state, if plain lines are on, and writes what it returns.
    fn line(&self, f: impl FnOnce(&mut Lines, Instant) -> Option<String>) {
        if let Some(lines) = &self.lines {
            let mut lines = lines.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(text) = f(&mut lines, Instant::now()) {
                eprintln!("{text}");
            }
        }
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
        self.line(|l, now| Some(l.start(label, total, now)));
    }
    fn advance(&self, n: u64) {
        self.bar.inc(n);
        self.line(|l, now| l.advance(n, now));
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
        self.line(|l, now| l.finish(now));
    }
}

/// The plain lines' state: the current work, how far it is, when it began and when a line
/// was last written.
#[derive(Debug)]
struct Lines {
    label: String,
    total: u64,
    done: u64,
    started: Instant,
    written: Instant,
}

impl Lines {
    fn new(now: Instant) -> Self {
        Self {
            label: String::new(),
            total: 0,
            done: 0,
            started: now,
            written: now,
        }
    }

    fn start(&mut self, label: &str, total: u64, now: Instant) -> String {
        *self = Self {
            label: label.to_owned(),
            total,
            ..Self::new(now)
        };
        format!("{label}: 0/{total}")
    }

    /// A line when the last one is [`LINE_EVERY`] old, else nothing.
    fn advance(&mut self, n: u64, now: Instant) -> Option<String> {
        self.done = self.done.saturating_add(n);
        if now.duration_since(self.written) < LINE_EVERY {
            return None;
        }
        self.written = now;
        let elapsed = now.duration_since(self.started);
        // No estimate before the first unit, after the last, or past what a Duration holds.
        let left = (self.done > 0 && self.done < self.total)
            .then(|| {
                let ratio = (self.total - self.done) as f64 / self.done as f64;
                Duration::try_from_secs_f64(elapsed.as_secs_f64() * ratio).ok()
            })
            .flatten();
        let eta = left.map_or_else(String::new, |l| format!(", about {} left", clock(l)));
        Some(format!(
            "{}: {}/{} after {}{eta}",
            self.label,
            self.done,
            self.total,
            clock(elapsed)
        ))
    }

    /// The closing line (none if no work was started).
    fn finish(&mut self, now: Instant) -> Option<String> {
        if self.label.is_empty() {
            return None;
        }
        let text = format!(
            "{}: {}/{} done in {}",
            self.label,
            self.done,
            self.total,
            clock(now.duration_since(self.started))
        );
        self.label.clear();
        Some(text)
    }
}

/// `h:mm:ss`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_are_throttled_and_estimate_what_is_left() {
        let t0 = Instant::now();
        let mut l = Lines::new(t0);
        assert_eq!(l.start("alg5-mnist", 600, t0), "alg5-mnist: 0/600");
        // Steps within the half minute write nothing.
        assert_eq!(l.advance(1, t0 + Duration::from_secs(10)), None);
        assert_eq!(l.advance(1, t0 + Duration::from_secs(29)), None);
        // The third step, 30 s in: 3 of 600 in 30 s leaves 597 · 10 s.
        assert_eq!(
            l.advance(1, t0 + Duration::from_secs(30)).as_deref(),
            Some("alg5-mnist: 3/600 after 0:00:30, about 1:39:30 left")
        );
        // The clock restarts at each line.
        assert_eq!(l.advance(1, t0 + Duration::from_secs(59)), None);
        assert!(l.advance(1, t0 + Duration::from_secs(60)).is_some());
        assert_eq!(
            l.finish(t0 + Duration::from_secs(3725)).as_deref(),
            Some("alg5-mnist: 5/600 done in 1:02:05")
        );
        // Finishing twice, or before any start, writes nothing more.
        assert_eq!(l.finish(t0 + Duration::from_secs(3726)), None);
        assert_eq!(Lines::new(t0).finish(t0), None);
    }

    #[test]
    fn an_estimate_beyond_a_duration_is_left_out_not_a_panic() {
        let t0 = Instant::now();
        let mut l = Lines::new(t0);
        l.start("huge", u64::MAX, t0);
        assert_eq!(
            l.advance(1, t0 + Duration::from_secs(3600)).as_deref(),
            Some(format!("huge: 1/{} after 1:00:00", u64::MAX).as_str())
        );
    }

    #[test]
    fn a_finished_count_has_no_estimate() {
        let t0 = Instant::now();
        let mut l = Lines::new(t0);
        l.start("runs", 2, t0);
        assert_eq!(
            l.advance(2, t0 + Duration::from_secs(31)).as_deref(),
            Some("runs: 2/2 after 0:00:31")
        );
    }
}
