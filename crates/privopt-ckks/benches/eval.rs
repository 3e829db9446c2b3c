//! Criterion benchmarks of the leveled CKKS engine (one thread); the same operations as
//! `privopt bench ckks`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use privopt_ckks::bench_support::{EVAL_BENCH_SETS, EvalFixture};

fn ckks(c: &mut Criterion) {
    for set in EVAL_BENCH_SETS {
        let mut f = EvalFixture::new(set.name, 1).unwrap();
        let mut g = c.benchmark_group(format!("ckks/{}", f.label()));
        g.bench_function("encode", |b| b.iter(|| black_box(f.encode().unwrap())));
        g.bench_function("encrypt", |b| b.iter(|| black_box(f.encrypt())));
        g.bench_function("decrypt", |b| b.iter(|| black_box(f.decrypt().unwrap())));
        g.bench_function("add", |b| b.iter(|| black_box(f.add().unwrap())));
        g.bench_function("mul_relin_rescale", |b| {
            b.iter(|| black_box(f.mul_relin_rescale().unwrap()))
        });
        g.bench_function("rotate", |b| b.iter(|| black_box(f.rotate().unwrap())));
        g.finish();
    }
}

criterion_group!(benches, ckks);
criterion_main!(benches);
