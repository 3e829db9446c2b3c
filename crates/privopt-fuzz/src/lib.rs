//! Fuzzing of privopt's decoders on stable Rust.
//!
//! Each [`Target`] is one decoder (or decoder and handler) fed hostile bytes: stacked
//! mutations of valid messages (bit flips, interesting bytes and integers, truncation,
//! insertion, deletion, duplication, splices of two messages) and fully random bytes. For
//! messages behind privopt-protocols' checksum the mutations go to the fields and the checksum
//! is recomputed ([`privopt_protocols::wire::damage::forge`]): what a malicious peer, not a
//! noisy link, can send. A panic, an input slower than [`SLOW_INPUT`] and a peak resident size
//! above the target's bound are failures; an `Err` is the expected outcome.
//!
//! `cargo run --release -p privopt-fuzz -- --seconds 600` is the long run (docs/security.md);
//! the crate's test runs every target briefly in CI.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

mod targets;

pub use targets::all_targets;

/// An input that takes longer than this to decode counts as a hang.
pub const SLOW_INPUT: Duration = Duration::from_secs(2);

/// Peak resident memory allowed while a target runs (the fixtures included): 1 GiB.
pub const PEAK_RSS_BOUND_KIB: u64 = 1 << 20;

/// Decodes (and handles) one input.
pub type Run = Box<dyn Fn(&[u8])>;

/// One decoder under test.
pub struct Target {
    /// `area/message`, e.g. `ckks/decryption-share`.
    pub name: &'static str,
    /// Valid encodings to mutate.
    pub seeds: Vec<Vec<u8>>,
    /// Whether the bytes end in privopt-protocols' checksum (mutate the fields, then reseal).
    pub framed: bool,
    /// Decodes (and handles) one input; the result is dropped: only a panic is a failure.
    pub run: Run,
}

/// How long to fuzz one target.
#[derive(Clone, Copy, Debug)]
pub enum Budget {
    /// This many inputs.
    Inputs(u64),
    /// Until this much time has passed.
    Time(Duration),
}

/// What one target's run found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Inputs decoded.
    pub inputs: u64,
    /// Inputs whose decoding panicked.
    pub panics: u64,
    /// Inputs slower than [`SLOW_INPUT`].
    pub slow: u64,
    /// The first failing input and what happened.
    pub first_failure: Option<(Vec<u8>, String)>,
    /// Wall time.
    pub seconds: f64,
    /// Peak resident size of the process during the run (Linux; 0 elsewhere).
    pub peak_rss_kib: u64,
}

impl Report {
    /// Whether nothing failed.
    pub fn clean(&self) -> bool {
        self.panics == 0 && self.slow == 0 && self.peak_rss_kib <= PEAK_RSS_BOUND_KIB
    }
}

/// Runs `target` within `budget`, inputs drawn from `seed`.
pub fn fuzz(target: &Target, budget: Budget, seed: u64) -> Report {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    reset_peak_rss();
    let start = Instant::now();
    let mut report = Report::default();
    // Panics are counted, not printed.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    loop {
        let done = match budget {
            Budget::Inputs(n) => report.inputs >= n,
            Budget::Time(t) => start.elapsed() >= t,
        };
        if done {
            break;
        }
        let input = next_input(target, &mut rng);
        let t0 = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| (target.run)(&input)));
        let took = t0.elapsed();
        report.inputs += 1;
        let failure = match outcome {
            Err(payload) => {
                report.panics += 1;
                Some(format!("panic: {}", panic_message(payload.as_ref())))
            }
            Ok(()) if took > SLOW_INPUT => {
                report.slow += 1;
                Some(format!("slow: {took:?}"))
            }
            Ok(()) => None,
        };
        if let Some(what) = failure
            && report.first_failure.is_none()
        {
            report.first_failure = Some((input, what));
        }
    }
    std::panic::set_hook(hook);
    report.seconds = start.elapsed().as_secs_f64();
    report.peak_rss_kib = peak_rss_kib();
    report
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string payload)".into())
}

/// One hostile input: mostly stacked mutations of a seed, sometimes random bytes.
fn next_input(target: &Target, rng: &mut ChaCha20Rng) -> Vec<u8> {
    let seed = &target.seeds[rng.random_range(0..target.seeds.len())];
    if rng.random_ratio(1, 16) {
        let len = rng.random_range(0..=seed.len().max(64) * 2);
        return (0..len).map(|_| rng.random()).collect();
    }
    let other = &target.seeds[rng.random_range(0..target.seeds.len())];
    let rounds = rng.random_range(1..=4);
    let mutate = |bytes: &mut Vec<u8>, rng: &mut ChaCha20Rng| {
        for _ in 0..rounds {
            mutate_once(bytes, other, rng);
        }
    };
    // Framed messages: a mutation of the whole frame (caught by the checksum) now and then,
    // mostly mutations of the fields behind a valid checksum.
    if target.framed && !rng.random_ratio(1, 8) {
        let mut local = ChaCha20Rng::seed_from_u64(rng.random());
        privopt_protocols::wire::damage::forge(seed, |fields| mutate(fields, &mut local))
    } else {
        let mut bytes = seed.clone();
        mutate(&mut bytes, rng);
        bytes
    }
}

/// Values that sit on the edges of lengths, counts and signed and unsigned ranges.
const INTERESTING_U64: [u64; 10] = [
    0,
    1,
    2,
    0x7f,
    0xff,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
    0x7fff_ffff_ffff_ffff,
    u64::MAX,
];

fn mutate_once(bytes: &mut Vec<u8>, other: &[u8], rng: &mut ChaCha20Rng) {
    let len = bytes.len();
    let at = |rng: &mut ChaCha20Rng| rng.random_range(0..len.max(1));
    match rng.random_range(0..9) {
        0 if len > 0 => {
            for _ in 0..rng.random_range(1..=8) {
                let i = at(rng);
                bytes[i] ^= 1 << rng.random_range(0..8);
            }
        }
        1 if len > 0 => {
            let i = at(rng);
            bytes[i] = [0u8, 1, 0x7f, 0x80, 0xff][rng.random_range(0..5)];
        }
        2 if len >= 8 => {
            // A little-endian integer field (4 or 8 bytes) set to an edge value.
            let width = if rng.random_bool(0.5) { 4 } else { 8 };
            let i = rng.random_range(0..=len - width);
            let v = INTERESTING_U64[rng.random_range(0..INTERESTING_U64.len())];
            bytes[i..i + width].copy_from_slice(&v.to_le_bytes()[..width]);
        }
        3 => bytes.truncate(rng.random_range(0..=len)),
        4 => {
            let i = rng.random_range(0..=len);
            let extra: Vec<u8> = (0..rng.random_range(1..=64))
                .map(|_| rng.random())
                .collect();
            bytes.splice(i..i, extra);
        }
        5 if len > 0 => {
            let i = at(rng);
            let j = rng.random_range(i..=len.min(i + 256));
            bytes.drain(i..j);
        }
        6 if len > 0 => {
            let i = at(rng);
            let j = rng.random_range(i..=len.min(i + 256));
            let chunk = bytes[i..j].to_vec();
            let k = rng.random_range(0..=len);
            bytes.splice(k..k, chunk);
        }
        7 => {
            // Head of this message, tail of another.
            let cut = rng.random_range(0..=len);
            let from = rng.random_range(0..=other.len());
            bytes.truncate(cut);
            bytes.extend_from_slice(&other[from..]);
        }
        _ => {
            if let Some(b) = bytes.last_mut() {
                *b = b.wrapping_add(1);
            }
        }
    }
}

/// Resets the kernel's peak-RSS mark of this process (Linux `clear_refs`; no-op elsewhere).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident size since the last reset, from `/proc/self/status` (0 where absent).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}
