//! Profiling helper: repeated products at n = 2^15.
#![allow(clippy::unwrap_used, missing_docs)]
use privopt_ckks::bench_support::EvalFixture;
fn main() {
    let set = std::env::args().nth(1).unwrap_or_else(|| "n32768".into());
    let f = EvalFixture::new(&set, 1).unwrap();
    for _ in 0..60 {
        std::hint::black_box(f.mul_relin_rescale().unwrap());
    }
}
