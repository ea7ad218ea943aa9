#!/usr/bin/env python3
"""Writes the golden inputs of tests/harness/test_compare.cpp (run once; the outputs are committed).
Samples are lognormal with a fixed seed, so the files never change unless this script does."""
import json, math, random, os

HERE = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(20261202)

def samples(median_s, cv, n):
    sigma = math.sqrt(math.log1p(cv * cv))
    return [round(median_s * math.exp(rng.gauss(0, sigma)), 12) for _ in range(n)]

PARAMS = {"BM": 96, "BN": 512, "BK": 256, "MR": 6, "NR": 32}

def case(M, dtype, toolchain, status, samp, reason=""):
    c = {"kernel": "matmul_tiled", "backend": "cpu", "params": PARAMS, "shape": {"M": M, "N": M, "K": M},
         "dtype": dtype, "toolchain": {"name": toolchain, "identity": "0" * 64, "target": ""}, "tier": "l1",
         "status": status, "samples_s": samp,
         "conditions": {"mode": "hot", "clock": "steady_clock", "batch": 1}}
    if reason:
        c["reason"] = reason
    return c

def run(cases, name):
    return {"kind": "sweep", "name": name, "environment": {"host": "golden"}, "cases": cases}

t512, t256, t384, t128, t640, tb = 10e-3, 1.3e-3, 4.4e-3, 0.17e-3, 20e-3, 12e-3
base = run([
    case(512, "f32", "clang-14", "ok", samples(t512, 0.01, 200)),
    case(256, "f32", "clang-14", "ok", samples(t256, 0.01, 100)),
    case(384, "f32", "clang-14", "ok", samples(t384, 0.01, 100)),
    case(128, "f32", "clang-14", "ok", samples(t128, 0.01, 100)),
    case(640, "f32", "clang-14", "ok", samples(t640, 0.01, 50)),
    case(512, "bf16", "clang-14", "ok", samples(tb, 0.05, 10)),
], "golden-base")
new = run([
    case(512, "f32", "clang-19", "ok", samples(t512, 0.01, 200)),          # same
    case(256, "f32", "clang-19", "ok", samples(t256 * 1.03, 0.01, 100)),   # 3% slower: worse
    case(384, "f32", "clang-19", "ok", samples(t384 / 1.05, 0.01, 100)),   # 5% faster: better
    case(128, "f32", "clang-19", "failed", [], "kernel crashed: signal 11 (Segmentation fault)"),
    case(512, "bf16", "clang-19", "ok", samples(tb * 1.01, 0.05, 10)),     # 1% at 5% noise, 10 samples: unsure
], "golden-new")
# Two toolchains per key in one file: matched on key + toolchain.
multi_base = run([case(256, "f32", "clang-14", "ok", samples(t256, 0.01, 60)),
                  case(256, "f32", "clang-19", "ok", samples(t256 * 0.9, 0.01, 60))], "multi-base")
multi_new = run([case(256, "f32", "clang-14", "ok", samples(t256, 0.01, 60)),
                 case(256, "f32", "clang-19", "ok", samples(t256 * 0.9 * 1.04, 0.01, 60))], "multi-new")

def gbench(entries):
    out = {"context": {"date": "2026-12-02T10:00:00+00:00", "host_name": "golden", "executable": "./bench",
                       "num_cpus": 2, "mhz_per_cpu": 2000, "cpu_scaling_enabled": False,
                       "caches": [], "load_avg": [0.5], "library_build_type": "release"},
           "benchmarks": []}
    fam = 0
    for name, unit, scale, med, cv, err in entries:
        reps = [] if err else samples(med, cv, 9)
        for i in range(9):
            b = {"name": name, "family_index": fam, "per_family_instance_index": 0, "run_name": name,
                 "run_type": "iteration", "repetitions": 9, "repetition_index": i, "threads": 1,
                 "iterations": 100}
            if err:
                b.update({"error_occurred": True, "error_message": "kernel returned 1"})
            else:
                t = reps[i] * scale
                b.update({"real_time": t, "cpu_time": t * 1.001, "time_unit": unit})
            out["benchmarks"].append(b)
        if not err:
            vals = sorted(r * scale for r in reps)
            mean = sum(vals) / 9
            for agg, v in (("mean", mean), ("median", vals[4]), ("stddev", 0.0)):
                out["benchmarks"].append({"name": name + "_" + agg, "family_index": fam, "run_name": name,
                                          "run_type": "aggregate", "repetitions": 9, "threads": 1,
                                          "aggregate_name": agg, "aggregate_unit": "time", "iterations": 9,
                                          "real_time": v * 5, "cpu_time": v * 5, "time_unit": unit})
        fam += 1
    return out

gb_base = gbench([("BM_matmul/512", "ms", 1e3, t512, 0.005, False),
                  ("BM_matmul/256", "us", 1e6, t256, 0.005, False),
                  ("BM_matmul/128", "ns", 1e9, t128, 0.005, False)])
gb_new = gbench([("BM_matmul/512", "ms", 1e3, t512, 0.005, False),
                 ("BM_matmul/256", "us", 1e6, t256 * 1.04, 0.005, False),
                 ("BM_matmul/128", "ns", 1e9, t128, 0.005, True)])

for fname, obj in (("base.json", base), ("new.json", new), ("multi_base.json", multi_base),
                   ("multi_new.json", multi_new), ("gbench_base.json", gb_base), ("gbench_new.json", gb_new)):
    with open(os.path.join(HERE, fname), "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
with open(os.path.join(HERE, "not_results.json"), "w") as f:
    f.write('{"hello": "world"}\n')
with open(os.path.join(HERE, "broken.json"), "w") as f:
    f.write('{"cases": [ {"kernel": "matmul_tiled",\n')
