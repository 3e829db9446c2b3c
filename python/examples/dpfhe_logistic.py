"""(ε, δ)-DP logistic regression, trained in the clear and by a server that sees only CKKS
ciphertexts, with scikit-learn's fit / predict.

    python examples/dpfhe_logistic.py                      # the built-in task, seconds
    python examples/dpfhe_logistic.py --dataset credit --encrypted-steps 30

Catalog datasets need ``privopt data fetch NAME`` first (read from ``$PRIVOPT_DATA`` or
``data``). ``--seed`` makes the run equal to ``privopt run`` of the ``dpfhe`` ``encrypted``
suite on that dataset with the same seed.
"""

from __future__ import annotations

import argparse

import numpy as np

from privopt.dpfhe import LogisticRegression, load_task


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve: the chance a positive outranks a negative (ties count ½)."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--encrypted-steps", type=int, default=4)
    parser.add_argument("--bootstrap", choices=["n15", "n16", "n16-stc-first"], default=None)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    x_train, y_train, x_test, y_test = load_task(args.dataset, seed=args.seed)
    print(f"{args.dataset}: {x_train.shape[0]} training rows, {x_train.shape[1]} features")

    # Plaintext, full batches, T = 1000 (the paper's Table 4 setting).
    for algorithm in ("noclip", "dpgd", "output"):
        clf = LogisticRegression(epsilon=args.epsilon, algorithm=algorithm, batch_size=None)
        clf.fit(x_train, y_train)
        print(f"  plaintext {algorithm:>6}: test accuracy {clf.score(x_test, y_test):.4f}")

    # Encrypted: batches of 100, noise calibrated for T = 1000, the first few steps run; the
    # plaintext twin from the same seed sees the same batches and noise.
    common = {
        "epsilon": args.epsilon,
        "batch_size": 100,
        "stop_after": args.encrypted_steps,
        "random_state": args.seed,
    }
    enc = LogisticRegression(
        encrypted=True, bootstrap=args.bootstrap, threads=args.threads, verbose=True, **common
    ).fit(x_train, y_train)
    twin = LogisticRegression(**common).fit(x_train, y_train)
    gap = float(np.abs(enc.coef_ - twin.coef_).max())
    assert enc.encrypted_ is not None
    print(
        f"  encrypted noclip ({enc.n_iter_} steps, {enc.encrypted_['seconds_per_step']:.2f} s/step,"
        f" {enc.encrypted_['refreshes']} owner refreshes, {enc.encrypted_['bootstraps']}"
        f" bootstraps): accuracy {enc.score(x_test, y_test):.4f},"
        f" AUC {auc(enc.decision_function(x_test), y_test):.6f}"
    )
    print(
        f"  its plaintext twin: accuracy {twin.score(x_test, y_test):.4f},"
        f" AUC {auc(twin.decision_function(x_test), y_test):.6f}, max |w_enc - w_plain| {gap:.1e}"
    )
    assert gap < 1e-4, gap


if __name__ == "__main__":
    main()
