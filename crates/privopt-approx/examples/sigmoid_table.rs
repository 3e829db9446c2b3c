//! Prints the polynomial-only columns of the FHE paper's Table 3 for degree-7 sigmoid fits.
use privopt_approx::functions::{Method, SIGMOID_LIPSCHITZ, approximate, sigmoid};
use privopt_approx::{Interval, error_report, max_abs_derivative};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "{:>4} {:>3} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "h", "m", "sup", "sup_cert", "l2", "rms", "max|p'|"
    );
    for h in [7.0, 10.0, 15.0, 20.0, 25.0, 30.0] {
        let iv = Interval::symmetric(h)?;
        for method in [Method::Minimax, Method::LeastSquares, Method::Chebyshev] {
            let p = approximate(sigmoid, iv, 7, method)?;
            let r = error_report(sigmoid, SIGMOID_LIPSCHITZ, &p, iv);
            println!(
                "{h:>4} {:>3} {:>9.4} {:>9.4} {:>9.4} {:>9.4} {:>9.5}",
                method.label(),
                r.sup,
                r.sup_bound,
                r.l2,
                r.rms,
                max_abs_derivative(&p, iv)
            );
        }
    }
    Ok(())
}
