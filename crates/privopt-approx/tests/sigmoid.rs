//! The sigmoid fits behind the FHE paper's Table 3: our least-squares sup errors equal the
//! paper's "Error" column, and the true minimax polynomial equioscillates with a smaller sup
//! error than any other degree-7 polynomial — so the paper's "MM" column (larger than its LS
//! one) cannot be the sup error of a minimax polynomial.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_approx::functions::{Method, SIGMOID_LIPSCHITZ, approximate, sigmoid};
use privopt_approx::{Interval, RemezOptions, error_report, remez};

#[test]
fn least_squares_sup_errors_match_the_paper() {
    // (h, the paper's LS "Error") at degree 7; h = 30 is excluded (see docs/dpfhe.md).
    for (h, paper) in [
        (7.0, 0.0230),
        (15.0, 0.0955),
        (20.0, 0.1439),
        (25.0, 0.1834),
    ] {
        let iv = Interval::symmetric(h).unwrap();
        let p = approximate(sigmoid, iv, 7, Method::LeastSquares).unwrap();
        let sup = error_report(sigmoid, SIGMOID_LIPSCHITZ, &p, iv).sup;
        assert!((sup - paper).abs() < 5e-4, "h={h}: {sup} vs {paper}");
    }
}

#[test]
fn minimax_sigmoid_equioscillates_below_every_other_fit() {
    for h in [7.0, 10.0, 20.0, 30.0] {
        let iv = Interval::symmetric(h).unwrap();
        let mm = remez(sigmoid, iv, 7, RemezOptions::default()).unwrap();
        assert!(
            mm.equioscillates(1e-6),
            "h={h}: {:?}",
            mm.alternation_errors
        );
        for method in [Method::LeastSquares, Method::Chebyshev] {
            let other = approximate(sigmoid, iv, 7, method).unwrap();
            let sup = error_report(sigmoid, SIGMOID_LIPSCHITZ, &other, iv).sup;
            assert!(
                mm.sup_error < sup,
                "h={h} {method:?}: minimax {} vs {sup}",
                mm.sup_error
            );
        }
    }
}
