"""privopt.dpfhe.LogisticRegression beside `privopt reproduce dpfhe-table4-maxabs`, in one run.

    python python/bench/dpfhe_estimator.py --dataset credit --runs 20

Runs the CLI's Table 4 (its features scaled as ``load_task`` scales them) for one dataset, then
the estimator's plaintext fits of the same three algorithms from seeds 0 … runs−1, and prints
the privacy plans (which must be equal) and test accuracy mean ± std side by side. The CLI's
runs draw every algorithm from one stream per run, the estimator one stream per fit, so the
runs are equal in distribution, not one by one.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import tempfile

import numpy as np

from privopt.dpfhe import LogisticRegression, load_task

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAN_KEYS = ("sigma_dpgd", "sigma_noclip", "noise_std_output", "noclip_eta", "noclip_r")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="credit")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--cli", default=str(ROOT / "target" / "release" / "privopt"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [args.cli, "reproduce", "dpfhe-table4-maxabs", "--datasets", args.dataset,
             "--runs", str(args.runs), "--out", out, "--force", "-q"],
            check=True,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        summary = json.loads((pathlib.Path(out) / "summary.json").read_text())
    prefix = f"table4_{args.dataset}"

    x_train, y_train, x_test, y_test = load_task(args.dataset, seed=0)
    plan: dict[str, float] = {}
    print(f"{args.dataset}, ε = 1, δ = 1e-5, T = 1000 full batches, {args.runs} runs each")
    print(f"{'algorithm':<10} {'privopt run':>18} {'LogisticRegression':>20}")
    for algorithm in ("dpgd", "noclip", "output"):
        accs = []
        for seed in range(args.runs):
            clf = LogisticRegression(algorithm=algorithm, batch_size=None, random_state=seed)
            accs.append(clf.fit(x_train, y_train).score(x_test, y_test))
            plan = clf.plan_
        cli = (summary[f"{prefix}_{algorithm}_acc_mean"], summary[f"{prefix}_{algorithm}_acc_std"])
        ours = (float(np.mean(accs)), float(np.std(accs)))
        print(f"{algorithm:<10} {cli[0]:>10.4f} ± {cli[1]:.4f} {ours[0]:>12.4f} ± {ours[1]:.4f}")
    for key in PLAN_KEYS:
        same = "equal" if plan[key] == summary[f"{prefix}_{key}"] else "DIFFERENT"
        print(f"plan {key}: {summary[f'{prefix}_{key}']!r} vs {plan[key]!r} ({same})")


if __name__ == "__main__":
    main()
