#!/usr/bin/env python3
# Experiment (issue 14, 2026-12-07; docs/calibration.md, "How much the fit is starved of
# labels"): probe-v1's pipeline on its own dev readings (block 14, the answer; read by
# `probe_blocks`), topic-grouped folds, each training fold subsampled to a share of its items
# (5 seeded repeats): out-of-fold binned agreement as a function of the number of dev labels.
# Dev items only. Needs numpy and scikit-learn.
#
#   python3 scripts/experiments/probe_learning_curve.py .cardinal/exp/blocks-dev-full.jsonl
import json, sys
import numpy as np
from probe_common import DIMS, load_labels, binof, binned, topic_folds, fit

labels = load_labels()
R = {}
for line in open(sys.argv[1]):
    r = json.loads(line); R[r['item_id']] = np.array(r['means'][2][0])
ids = sorted(R); X = np.array([R[i] for i in ids])
tg = topic_folds(labels, ids)
for frac in [0.4, 0.6, 0.8, 1.0]:
    out = {}; sizes = []
    for dim in DIMS:
        y = np.array([labels[i][1][dim] for i in ids]); yb = np.array([binof(v) for v in y]); accs = []
        for rep in range(5):
            rng = np.random.RandomState(rep); pb = np.zeros(len(y), int)
            for g in np.unique(tg):
                te = tg == g; tr = np.where(~te)[0]; tr = rng.choice(tr, int(len(tr) * frac), replace=False)
                sizes.append(len(tr))
                pred, lo, hi = fit(X[tr], y[tr]); pb[te] = binned(pred(X[te]), lo, hi)
            accs.append((pb == yb).mean())
            if frac == 1.0: break
        out[dim] = round(float(np.mean(accs)), 3)
    print(frac, f'{np.mean(sizes):.0f} training items per fold', out)
