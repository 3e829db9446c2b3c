//! The interface long work reports progress through and is asked to stop through: the CLI
//! draws a bar, the Python binding writes lines and checks for Ctrl-C, tests use
//! [`NoProgress`]. It sits here, at the bottom, so that every driver (a simulation, dpfhe's
//! fit) and every front end share one trait.

/// Reports progress of long work.
pub trait Progress {
    /// Work of `total` units called `label` begins.
    fn start(&self, label: &str, total: u64);
    /// `n` more units are done.
    fn advance(&self, n: u64);
    /// The work is over.
    fn finish(&self);
    /// Whether the caller wants long work stopped (asked between steps of work that takes
    /// seconds per step, e.g. an encrypted training step).
    fn should_stop(&self) -> bool {
        false
    }
}

/// A [`Progress`] that reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}
