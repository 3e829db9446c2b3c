//! The CKKS suites: leveled operations, xMK-CKKS, and bootstrapping, each bootstrapping case
//! in a child process of its own (`privopt bench-bootstrap`) so its peak memory is its own.

use std::hint::black_box;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use privopt_ckks::eval::bootstrap::PhaseSeconds;

use super::{Case, Measurement, Op, SELF_TIMED_BUDGET, median, peak_rss_mb, stdout_of};

/// The period of the sparse-packing bootstrapping cases.
pub(super) const SPARSE_CASE_SLOTS: usize = 1024;

/// How a bootstrapping case departs from its preset.
#[derive(Clone, Copy, Debug, Default)]
pub struct BootstrapVariant {
    /// Compact keys and transforms (`BootstrapConfig::compact`).
    pub compact: bool,
    /// Every diagonal stored whole, against the preset's compact transforms
    /// (`BootstrapConfig::compact_transforms`).
    pub whole_transforms: bool,
    /// CoeffsToSlots' baby rotations this many at a time (`BabySteps::Grouped`); `None`: all
    /// hoisted. SlotsToCoeffs' stay hoisted: its keys are made at its low level and are
    /// small, and a chain there runs on the 57- and 60-bit primes (measured at N15: +0.25 s
    /// for 0.27 GB).
    pub baby_group: Option<usize>,
    /// Sparse packing of this period.
    pub slots: Option<usize>,
    /// Also time the bootstrap on this many threads (the same keys; the output must be the
    /// one-thread output to the bit), reported in the case's detail.
    pub also_threads: Option<usize>,
}

/// `ckks/n<n>/bootstrap`, `…/bootstrap-compact` with compact keys and transforms,
/// `…/bootstrap-g<M>` with CoeffsToSlots' baby rotations `M` at a time, and `…/bootstrap-s<S>` for sparse
/// packing of period `S`.
fn bootstrap_case_name(n: usize, v: BootstrapVariant) -> String {
    let compact = if v.compact { "-compact" } else { "" };
    let group = v.baby_group.map(|m| format!("-g{m}")).unwrap_or_default();
    let sparse = v.slots.map(|s| format!("-s{s}")).unwrap_or_default();
    format!("ckks/n{n}/bootstrap{compact}{group}{sparse}")
}

/// Runs `privopt bench-bootstrap PRESET` as a child process and reads its one JSON line.
fn run_child_case(preset: &str, runs: usize, v: BootstrapVariant) -> Result<Measurement> {
    let exe = std::env::current_exe().context("cannot find the privopt executable")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["bench-bootstrap", preset, "--runs", &runs.to_string()]);
    if v.compact {
        cmd.arg("--compact");
    }
    if let Some(m) = v.baby_group {
        cmd.args(["--baby-group", &m.to_string()]);
    }
    if let Some(s) = v.slots {
        cmd.args(["--slots", &s.to_string()]);
    }
    if let Some(t) = v.also_threads {
        cmd.args(["--also-threads", &t.to_string()]);
    }
    let text = stdout_of(cmd, &format!("the bootstrapping case {preset}"))?;
    let line = text
        .lines()
        .last()
        .context("the bootstrapping case printed nothing")?;
    serde_json::from_str(line).context("the bootstrapping case's output")
}

/// `privopt bench-bootstrap PRESET`: one preset's bootstrap timed in this process (one warm-up,
/// then up to `runs` samples within about a minute), printed as one JSON [`Measurement`] line
/// with the peak RSS and the precision.
pub fn bootstrap_child(preset: &str, runs: usize, v: BootstrapVariant) -> Result<()> {
    use privopt_ckks::bench_support::BootstrapFixture;
    use privopt_ckks::eval::BabySteps;
    use privopt_ckks::eval::bootstrap::{BootstrapConfig, BootstrapPreset};
    let Some(p) = BootstrapPreset::ALL
        .into_iter()
        .find(|p| p.name() == preset)
    else {
        bail!("unknown bootstrapping preset `{preset}`; known: n15, n16");
    };
    if v.baby_group == Some(0) {
        bail!("--baby-group needs at least one baby rotation per group");
    }
    if v.compact && v.whole_transforms {
        bail!("--compact makes the transforms compact; it cannot go with --whole-transforms");
    }
    let base = p.config();
    let config = BootstrapConfig {
        compact: v.compact,
        compact_transforms: base.compact_transforms && !v.whole_transforms,
        cts_babies: v.baby_group.map_or(BabySteps::Hoisted, BabySteps::Grouped),
        slots: v.slots,
        ..base
    };
    let mut f = BootstrapFixture::new(p, config)?;
    let (median_ns, runs, out, phases) = time_bootstraps(&f, runs)?;
    let (bits, level) = f.precision_bits(&out)?;
    let threads = match v.also_threads {
        Some(t) if t < 2 => bail!("--also-threads needs at least 2 threads"),
        Some(t) => {
            f.set_threads(t)?;
            let (t_ns, _, t_out, t_phases) = time_bootstraps(&f, runs)?;
            if t_out != out {
                bail!("the bootstrap on {t} threads differs from the one-thread bootstrap");
            }
            format!(
                "one thread ({}); {t} threads {:.2} s ({:.2}×, the same bits; {})",
                phase_text(&phases),
                t_ns / 1e9,
                median_ns / t_ns,
                phase_text(&t_phases)
            )
        }
        None => format!("one thread ({})", phase_text(&phases)),
    };
    let m = Measurement {
        name: bootstrap_case_name(p.n(), v),
        median_ns,
        runs,
        peak_rss_mb: peak_rss_mb(),
        detail: Some(format!(
            "{bits:.1} bits, {level} levels left, {} Galois keys of {:.0} MB, transforms {:.0} \
             MB, setup {:.1} s, keygen {:.1} s, {threads}",
            f.galois_keys,
            f.galois_bytes as f64 / 1e6,
            f.transform_bytes as f64 / 1e6,
            f.setup_seconds,
            f.keygen_seconds
        )),
    };
    outln!("{}", serde_json::to_string(&m)?)?;
    Ok(())
}

/// Each phase's median seconds, as `ModRaise a, CtS b, EvalMod c, StC d`.
fn phase_text(p: &PhaseSeconds) -> String {
    format!(
        "ModRaise {:.2}, CtS {:.2}, EvalMod {:.2}, StC {:.2} s",
        p.mod_raise, p.coeffs_to_slots, p.eval_mod, p.slots_to_coeffs
    )
}

/// One warm-up, then up to `runs` timed bootstraps within about a minute: the median in
/// nanoseconds, the samples taken, the last output and each phase's median seconds.
fn time_bootstraps(
    f: &privopt_ckks::bench_support::BootstrapFixture,
    runs: usize,
) -> Result<(f64, usize, privopt_ckks::eval::Ciphertext, PhaseSeconds)> {
    let clock = Instant::now();
    let (mut out, _) = f.bootstrap()?;
    let first = clock.elapsed().as_secs_f64().max(1e-9);
    let runs = ((SELF_TIMED_BUDGET.as_secs_f64() / first) as usize).clamp(1, runs.max(1));
    let mut samples = Vec::with_capacity(runs);
    let mut phases = Vec::with_capacity(runs);
    for _ in 0..runs {
        let clock = Instant::now();
        let (o, p) = f.bootstrap()?;
        samples.push(clock.elapsed().as_nanos() as f64);
        out = o;
        phases.push(p);
    }
    let phase =
        |get: fn(&PhaseSeconds) -> f64| median(&mut phases.iter().map(get).collect::<Vec<_>>());
    let medians = PhaseSeconds {
        mod_raise: phase(|p| p.mod_raise),
        coeffs_to_slots: phase(|p| p.coeffs_to_slots),
        eval_mod: phase(|p| p.eval_mod),
        slots_to_coeffs: phase(|p| p.slots_to_coeffs),
    };
    Ok((median(&mut samples), runs, out, medians))
}

pub(super) fn ckks_suite() -> Result<Vec<Case>> {
    use std::cell::RefCell;
    use std::rc::Rc;

    use privopt_ckks::bench_support::{EVAL_BENCH_SETS, EvalFixture};

    let mut cases = Vec::new();
    for set in EVAL_BENCH_SETS.iter().map(|s| s.name) {
        let f = EvalFixture::new(set, 1)?;
        let err = f.product_error()?;
        if err > 1e-3 {
            bail!("ckks/{set}: a product decrypts {err:e} off; refusing to time a broken engine");
        }
        let f = Rc::new(RefCell::new(f));
        let name = |op: &str| format!("ckks/{set}/{op}");
        let g = Rc::clone(&f);
        cases.push(Case::new(name("encode"), move || {
            black_box(g.borrow().encode().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("encrypt"), move || {
            black_box(g.borrow_mut().encrypt().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("decrypt"), move || {
            black_box(g.borrow().decrypt().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("add"), move || {
            black_box(g.borrow().add().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("mul_relin_rescale"), move || {
            black_box(g.borrow().mul_relin_rescale().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("rotate"), move || {
            black_box(g.borrow().rotate().ok());
        }));
    }
    // Full, compact and with CoeffsToSlots' baby rotations one at a time at full packing;
    // sparse packing of 1024 slots (the dpfhe MNIST weights' period).
    for preset in privopt_ckks::eval::bootstrap::BootstrapPreset::ALL {
        for v in [
            BootstrapVariant {
                also_threads: Some(2),
                ..BootstrapVariant::default()
            },
            BootstrapVariant {
                compact: true,
                ..BootstrapVariant::default()
            },
            BootstrapVariant {
                baby_group: Some(1),
                ..BootstrapVariant::default()
            },
            BootstrapVariant {
                slots: Some(SPARSE_CASE_SLOTS),
                ..BootstrapVariant::default()
            },
        ] {
            cases.push(Case {
                name: bootstrap_case_name(preset.n(), v),
                op: Op::Child(Box::new(move |runs| run_child_case(preset.name(), runs, v))),
            });
        }
    }
    Ok(cases)
}

pub(super) fn mkckks_suite() -> Result<Vec<Case>> {
    use std::cell::RefCell;
    use std::rc::Rc;

    use privopt_ckks::CkksParams;
    use privopt_ckks::bench_support::MkCkksFixture;

    let mut cases = Vec::new();
    for params in [CkksParams::paper_n4096()?, CkksParams::paper_n8192()?] {
        let f = Rc::new(RefCell::new(MkCkksFixture::new(params, 10)?));
        let label = f.borrow().label();
        let parties = f.borrow().parties();
        let name = |op: &str| format!("mkckks/{label}/{op}");
        // Each closure reports a failure of the measured operation by printing once; the
        // fixture is valid by construction, so this does not happen in practice.
        let g = Rc::clone(&f);
        cases.push(Case::new(name("keygen"), move || {
            black_box(g.borrow_mut().keygen());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("encrypt_scalar"), move || {
            black_box(g.borrow_mut().encrypt_scalar().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("encrypt_vector"), move || {
            black_box(g.borrow_mut().encrypt_vector().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name(&format!("aggregate{parties}")), move || {
            black_box(g.borrow().aggregate().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name("partial_decrypt"), move || {
            black_box(g.borrow_mut().partial_decrypt().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(name(&format!("fusion{parties}")), move || {
            black_box(g.borrow().fusion().ok());
        }));
        let g = Rc::clone(&f);
        cases.push(Case::new(
            name(&format!("fusion{parties}_scalar")),
            move || {
                black_box(g.borrow().fusion_scalar().ok());
            },
        ));
    }
    for params in [
        CkksParams::paper_n8192()?,
        privopt_ckks::CkksParamsBuilder::new(1 << 15, &[50; 8]).build()?,
    ] {
        cases.push(threshold_case(params)?);
    }
    Ok(cases)
}

/// t = 7 of 10 xMK-CKKS, one self-timed pass: a party's re-sharing (`deal`), a member's
/// setup from its ten shares (`combine`), the dealing check (one member's answer,
/// `check_answer`, and the server's verification of all ten dealings, `check_verify10`), then
/// per decryption of a fresh sum of ten scalars one member's share (`share`) and the fusion
/// of seven (`fuse7`). Self-timed because a member answers once per ciphertext and once per
/// setup: each pass encrypts anew and sets the members up again, untimed.
fn threshold_case(params: std::sync::Arc<privopt_ckks::CkksParams>) -> Result<Case> {
    use privopt_ckks::multiparty::{
        ActiveSet, Ciphertext, CollectivePublicKey, Committee, CommonPoly, DealingCheck, Party,
        ThresholdParty, failed_dealers, fuse_threshold,
    };
    use privopt_math::sample::secret_rng;
    use std::time::Instant;

    let (session, ids) = (1, (0..10u32).collect::<Vec<_>>());
    let mut rng = secret_rng(Some(11));
    let crs = CommonPoly::from_seed(&params, [3u8; 32]);
    let parties: Vec<Party> = ids
        .iter()
        .map(|&i| Party::generate(i, &params, &crs, &mut rng))
        .collect();
    let pk: Vec<_> = parties
        .iter()
        .map(|p| p.public_key_share(session))
        .collect();
    let key = CollectivePublicKey::aggregate(&params, &crs, &ids, session, &pk)?;
    let committee = Committee::new(7, &ids)?;
    let dealt = parties
        .iter()
        .map(|p| p.deal(&committee, session, &mut rng))
        .collect::<Result<Vec<_>, _>>()?;
    let setup_members = move |parties: &[Party], committee: &Committee| {
        parties
            .iter()
            .enumerate()
            .map(|(j, p)| {
                let inbox: Vec<_> = dealt.iter().map(|d| d[j].clone()).collect();
                ThresholdParty::from_shares(p, committee, session, &inbox)
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let label = format!("n{}", params.n());
    Ok(Case::self_timed(
        format!("mkckks/{label}/threshold7of10"),
        move || {
            let start = Instant::now();
            let shares = parties[0].deal(&committee, session, &mut rng)?;
            let deal = start.elapsed();
            let start = Instant::now();
            let mut members = setup_members(&parties[..1], &committee)?;
            let combine = start.elapsed();
            members.extend(setup_members(&parties, &committee)?.into_iter().skip(1));
            black_box(shares);
            let check = DealingCheck::new(&committee, session, [5u8; 32], &ids)?;
            let mut dealing = Vec::new();
            let mut check_answer = std::time::Duration::ZERO;
            for m in &mut members {
                let start = Instant::now();
                dealing.push(m.answer_dealing_check(&check, &crs, &mut rng)?);
                check_answer += start.elapsed();
            }
            let start = Instant::now();
            let failed = failed_dealers(&params, &committee, &crs, &pk, &check, &dealing)?;
            let check_verify = start.elapsed();
            if !failed.is_empty() {
                anyhow::bail!("sound dealings failed the check: {failed:?}");
            }
            let cts = (0..10)
                .map(|i| key.encrypt_scalar(f64::from(i) * 0.1, &mut rng))
                .collect::<Result<Vec<_>, _>>()?;
            let sum = Ciphertext::sum(&cts)?;
            let active = ActiveSet::new(&committee, &sum, &[0, 1, 2, 3, 4, 5, 6])?;
            let mut answers = Vec::new();
            let mut share = std::time::Duration::ZERO;
            for m in &mut members[..7] {
                let start = Instant::now();
                answers.push(m.partial_decrypt(&sum, &active, &mut rng)?);
                share += start.elapsed();
            }
            let start = Instant::now();
            black_box(fuse_threshold(&sum, &active, &answers)?.scalar()?);
            let fuse = start.elapsed();
            Ok(vec![
                ("deal", deal),
                ("combine", combine),
                ("check_answer", check_answer / 10),
                ("check_verify10", check_verify),
                ("share", share / 7),
                ("fuse7", fuse),
            ])
        },
    ))
}
