//! The CKKS suites: leveled operations, xMK-CKKS, and bootstrapping, each bootstrapping case
//! in a child process of its own (`privopt bench-bootstrap`) so its peak memory is its own.

use std::hint::black_box;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use privopt_ckks::eval::bootstrap::{BootstrapPreset, PhaseSeconds};

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
fn bootstrap_case_name(preset: BootstrapPreset, v: BootstrapVariant) -> String {
    let n = preset.n();
    let order = if preset.config().slots_to_coeffs_first {
        "-stc-first"
    } else {
        ""
    };
    let compact = if v.compact { "-compact" } else { "" };
    let group = v.baby_group.map(|m| format!("-g{m}")).unwrap_or_default();
    let sparse = v.slots.map(|s| format!("-s{s}")).unwrap_or_default();
    format!("ckks/n{n}{order}/bootstrap{compact}{group}{sparse}")
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
    use privopt_ckks::eval::bootstrap::BootstrapConfig;
    let Some(p) = BootstrapPreset::named(preset) else {
        bail!(
            "unknown bootstrapping preset `{preset}`; known: {}",
            BootstrapPreset::names().join(", ")
        );
    };
    if v.baby_group == Some(0) {
        bail!("--baby-group needs at least one baby rotation per group");
    }
    if v.also_threads.is_some_and(|t| t < 2) {
        bail!("--also-threads needs at least 2 threads");
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
    let (one, runs, out, threads) = match v.also_threads {
        Some(t) => {
            let (one, many, speedup, runs, out) = time_alternating(&mut f, t, runs)?;
            let text = format!(
                "one thread ({}); {t} threads {:.2} s ({speedup:.2}×, the median of {runs} \
                 alternated pairs' ratios; the same bits; {})",
                phase_text(&one.phases),
                many.median_ns / 1e9,
                phase_text(&many.phases)
            );
            (one, runs, out, text)
        }
        None => {
            let (one, runs, out) = time_bootstraps(&f, runs)?;
            let text = format!("one thread ({})", phase_text(&one.phases));
            (one, runs, out, text)
        }
    };
    let (bits, level) = f.precision_bits(&out)?;
    let m = Measurement {
        name: bootstrap_case_name(p, v),
        median_ns: one.median_ns,
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

/// A bootstrap timed: the median of its samples and of each phase.
struct Timed {
    median_ns: f64,
    phases: PhaseSeconds,
}

/// Samples of one setting, reduced to medians.
#[derive(Default)]
struct Samples {
    ns: Vec<f64>,
    phases: Vec<PhaseSeconds>,
}

impl Samples {
    /// One bootstrap, recorded; its output.
    fn take(
        &mut self,
        f: &privopt_ckks::bench_support::BootstrapFixture,
    ) -> Result<privopt_ckks::eval::Ciphertext> {
        let clock = Instant::now();
        let (out, phases) = f.bootstrap()?;
        self.ns.push(clock.elapsed().as_nanos() as f64);
        self.phases.push(phases);
        Ok(out)
    }

    fn timed(mut self) -> Timed {
        let phases = &self.phases;
        let phase =
            |get: fn(&PhaseSeconds) -> f64| median(&mut phases.iter().map(get).collect::<Vec<_>>());
        let phases = PhaseSeconds {
            mod_raise: phase(|p| p.mod_raise),
            coeffs_to_slots: phase(|p| p.coeffs_to_slots),
            eval_mod: phase(|p| p.eval_mod),
            slots_to_coeffs: phase(|p| p.slots_to_coeffs),
        };
        Timed {
            median_ns: median(&mut self.ns),
            phases,
        }
    }
}

/// How many samples fit the self-timed budget (at least 1, at most `runs`) when one takes
/// `first_ns`.
fn samples_within_budget(first_ns: f64, runs: usize) -> usize {
    ((SELF_TIMED_BUDGET.as_secs_f64() * 1e9 / first_ns.max(1.0)) as usize).clamp(1, runs.max(1))
}

/// One warm-up, then up to `runs` timed bootstraps within about a minute: their medians, how
/// many, and the output.
fn time_bootstraps(
    f: &privopt_ckks::bench_support::BootstrapFixture,
    runs: usize,
) -> Result<(Timed, usize, privopt_ckks::eval::Ciphertext)> {
    let mut warm = Samples::default();
    let mut out = warm.take(f)?;
    let runs = samples_within_budget(warm.ns[0], runs);
    let mut samples = Samples::default();
    for _ in 0..runs {
        out = samples.take(f)?;
    }
    Ok((samples.timed(), runs, out))
}

/// A one-thread bootstrap, then one on `threads` threads, which must give the same output.
fn alternate(
    f: &mut privopt_ckks::bench_support::BootstrapFixture,
    threads: usize,
    one: &mut Samples,
    many: &mut Samples,
) -> Result<privopt_ckks::eval::Ciphertext> {
    f.set_threads(1)?;
    let out = one.take(f)?;
    f.set_threads(threads)?;
    if many.take(f)? != out {
        bail!("the bootstrap on {threads} threads differs from the one-thread bootstrap");
    }
    Ok(out)
}

/// One thread and `threads` threads in turn (a warm-up of each, then up to `runs` pairs within
/// about two minutes), so that the machine's drift between windows (±15% on the 2-core VM of
/// docs/ckks-eval.md) falls on both alike: each setting's medians, the median of the pairs'
/// speed-ups, how many pairs, and the output (every many-thread output must equal the
/// one-thread output to the bit).
fn time_alternating(
    f: &mut privopt_ckks::bench_support::BootstrapFixture,
    threads: usize,
    runs: usize,
) -> Result<(Timed, Timed, f64, usize, privopt_ckks::eval::Ciphertext)> {
    let (mut one, mut many) = (Samples::default(), Samples::default());
    let (mut warm_one, mut warm_many) = (Samples::default(), Samples::default());
    let mut out = alternate(f, threads, &mut warm_one, &mut warm_many)?;
    let runs = samples_within_budget((warm_one.ns[0] + warm_many.ns[0]) / 2.0, runs);
    for _ in 0..runs {
        out = alternate(f, threads, &mut one, &mut many)?;
    }
    let mut ratios: Vec<f64> = one.ns.iter().zip(&many.ns).map(|(a, b)| a / b).collect();
    let speedup = median(&mut ratios);
    Ok((one.timed(), many.timed(), speedup, runs, out))
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
    for preset in BootstrapPreset::ALL {
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
                name: bootstrap_case_name(preset, v),
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
