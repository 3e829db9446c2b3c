"""python-paillier timings for `privopt bench paillier` (the peer column).

Run by the bench with the interpreter given by --peer-python; prints one JSON object per line:
{"name": "paillier/<bits>/<op>", "median_ns": <float>}. Single thread, medians of repeated
samples, the same operations and operand sizes as privopt's cases.
"""
import json
import statistics
import sys
import time

from phe import paillier


def median_ns(op, runs):
    op()  # warm-up
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        op()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    for bits in (2048, 3072):
        pk, sk = paillier.generate_paillier_keypair(n_length=bits)
        m = -123456789
        c = pk.encrypt(m)
        c2 = pk.encrypt(42)
        cases = {
            "encrypt": lambda: pk.encrypt(m),
            "decrypt": lambda: sk.decrypt(c),
            "add": lambda: c + c2,
            "mul16": lambda: c * -40000,
        }
        for op, fn in cases.items():
            ns = median_ns(fn, runs)
            print(json.dumps({"name": f"paillier/{bits}/{op}", "median_ns": ns}), flush=True)


if __name__ == "__main__":
    main()
