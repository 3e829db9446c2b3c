//! Centralized minibatch SGD: the non-private, non-federated reference point.

use privopt_ml::data::minibatch;
use serde::{Deserialize, Serialize};

use super::{LrSchedule, Method, Trained, check_lr, descend};
use crate::context::RunContext;
use crate::error::{MAX_STEPS, Result, ensure, ensure_count};

/// `[method] name = "sgd"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SgdConfig {
    /// Number of SGD steps (>= 1).
    pub steps: u64,
    /// Base learning rate (> 0).
    pub lr: f64,
    /// Examples per step (>= 1).
    pub batch_size: usize,
    /// Learning-rate schedule.
    #[serde(default)]
    pub lr_schedule: LrSchedule,
    /// Evaluate every this many steps (0: about 50 evaluations).
    #[serde(default)]
    pub eval_every: u64,
}

impl Method for SgdConfig {
    fn validate(&self) -> Result<()> {
        ensure_count("method.steps", self.steps, MAX_STEPS)?;
        ensure(self.batch_size >= 1, || {
            "method.batch_size must be >= 1".into()
        })?;
        check_lr(self.lr)
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Trained> {
        let p = ctx.problem()?;
        let mut w = p
            .model
            .init_params(&mut ctx.seeds.stream("model/init", &[]));
        let mut g = vec![0.0; w.len()];
        let all: Vec<usize> = (0..p.train.len()).collect();
        ctx.train_loop("sgd", self.steps, self.eval_every, &mut w, |ctx, t, w| {
            let batch = minibatch(
                &all,
                self.batch_size,
                &mut ctx.seeds.stream("sgd/batch", &[t]),
            );
            p.model.loss_grad(w, &p.train, Some(&batch), &mut g);
            descend(w, &g, self.lr_schedule.at(self.lr, t));
            Ok(())
        })?;
        Ok(Trained::plain(w))
    }
}
