//! Criterion benchmarks of xMK-CKKS (single thread, 10 parties); the same operations as
//! `privopt bench mkckks`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use privopt_ckks::CkksParams;
use privopt_ckks::bench_support::MkCkksFixture;

fn mkckks(c: &mut Criterion) {
    for params in [
        CkksParams::paper_n4096().unwrap(),
        CkksParams::paper_n8192().unwrap(),
    ] {
        let mut f = MkCkksFixture::new(params, 10).unwrap();
        let mut g = c.benchmark_group(format!("mkckks/{}", f.label()));
        g.bench_function("keygen", |b| b.iter(|| black_box(f.keygen())));
        g.bench_function("encrypt_scalar", |b| {
            b.iter(|| black_box(f.encrypt_scalar().unwrap()))
        });
        g.bench_function("encrypt_vector", |b| {
            b.iter(|| black_box(f.encrypt_vector().unwrap()))
        });
        g.bench_function("aggregate10", |b| {
            b.iter(|| black_box(f.aggregate().unwrap()))
        });
        g.bench_function("partial_decrypt", |b| {
            b.iter(|| black_box(f.partial_decrypt().unwrap()))
        });
        g.bench_function("fusion10", |b| b.iter(|| black_box(f.fusion().unwrap())));
        g.finish();
    }
}

criterion_group!(benches, mkckks);
criterion_main!(benches);
