//! Centralized minibatch SGD: the non-private, non-federated reference point.

use serde::{Deserialize, Serialize};

use super::{LrSchedule, Method, check_lr, descend, eval_interval, minibatch};
use crate::error::{Result, ensure};
use crate::runner::RunContext;

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
        ensure(self.steps >= 1, || "method.steps must be >= 1".into())?;
        ensure(self.batch_size >= 1, || {
            "method.batch_size must be >= 1".into()
        })?;
        check_lr(self.lr)
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Vec<f64>> {
        let p = ctx.problem;
        let model = &p.model;
        let mut w = model.init_params(&mut ctx.seeds.stream("model/init", &[]));
        let mut g = vec![0.0; w.len()];
        let all: Vec<usize> = (0..p.train.len()).collect();
        let every = eval_interval(self.eval_every, self.steps);
        ctx.evaluate(0, &w, &[])?;
        ctx.progress.start("sgd", self.steps);
        for t in 0..self.steps {
            let batch = minibatch(
                &all,
                self.batch_size,
                &mut ctx.seeds.stream("sgd/batch", &[t]),
            );
            model.loss_grad(&w, &p.train, Some(&batch), &mut g);
            descend(&mut w, &g, self.lr_schedule.at(self.lr, t));
            if (t + 1) % every == 0 || t + 1 == self.steps {
                ctx.evaluate(t + 1, &w, &[])?;
            }
            ctx.progress.advance(1);
        }
        ctx.progress.finish();
        Ok(w)
    }
}
