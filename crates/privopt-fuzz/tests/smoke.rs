//! A short bounded pass of every fuzz target (CI): no panic, no slow input, peak RSS within
//! the bound. The long run is `cargo run --release -p privopt-fuzz -- --seconds 600`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_fuzz::{Budget, all_targets, fuzz};

#[test]
fn every_target_survives_a_short_pass() {
    let targets = all_targets().unwrap();
    assert!(targets.len() >= 20, "{} targets", targets.len());
    let mut failures = Vec::new();
    for t in &targets {
        let r = fuzz(t, Budget::Inputs(300), 1);
        assert_eq!(r.inputs, 300);
        if !r.clean() {
            failures.push(format!("{}: {:?}", t.name, r.first_failure.map(|f| f.1)));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The engine itself finds a planted bug: a decoder that panics on one byte value.
#[test]
fn a_planted_panic_is_found() {
    let t = privopt_fuzz::Target {
        name: "planted",
        seeds: vec![vec![1, 2, 3, 4, 5, 6, 7, 8]],
        framed: false,
        run: Box::new(|b| {
            if b.contains(&0xff) {
                panic!("planted");
            }
        }),
    };
    let r = fuzz(&t, Budget::Inputs(2000), 3);
    assert!(r.panics > 0);
    assert!(!r.clean());
    let (input, what) = r.first_failure.unwrap();
    assert!(input.contains(&0xff) && what.contains("planted"), "{what}");
}
