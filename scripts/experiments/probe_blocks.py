#!/usr/bin/env python3
# Experiment (issue 14, 2026-12-07, seventeenth sitting; docs/calibration.md, "several blocks
# and a reviewer's question"): do other blocks of the 1.5B judge, or the state where the model
# has read the cards, the answer and a reviewer's question about them, judge better than
# probe-v1's block-14 mean over the answer? Needs numpy and scikit-learn.
#
#   readings: cargo run -p cardinal-harness --example probe_blocks -- --split dev --framing full \
#                 --out .cardinal/exp/blocks-dev-full.jsonl
#             (and --framing header --category rule_violation for the control; same for test)
#   dev:  python3 scripts/experiments/probe_blocks.py dev DEV_FULL.jsonl DEV_HEADER.jsonl
#   test: python3 scripts/experiments/probe_blocks.py test DEV_FULL.jsonl TEST_FULL.jsonl \
#             TEST_HEADER.jsonl VARIANT
#
# Each reading holds, for blocks 6, 10, 14 and 18 (of 28), the mean output over three pieces
# of one pass: the answer (A; block 14 is probe-v1's reading exactly), reviewer's question 1
# (Q1: is every statement supported by the facts?) and question 2 (Q2: does it contradict a
# fact or do what a rule forbids?), both appended after the answer.
#
# Pre-registered before any result was seen (written and committed before the dev readings
# were analysed):
#   variants  F    A at block 14 (probe-v1)
#             A3   A at blocks 10, 14, 18 concatenated
#             A4   A at blocks 6, 10, 14, 18 concatenated
#             Q    Q1 and Q2 at blocks 14 and 18
#             FQ   F + Q
#             ALL  A, Q1 and Q2 at all four blocks
#             each through probe-v1's pipeline unchanged: standardise (per column), PCA 32,
#             ridge alpha 10, cut points fitted in-fold on the training folds' predictions.
#   folds     topic-grouped 10 folds (seed 0) and one language held out (probe_common.py)
#   control   out of fold on the dev rule-violation items: the same model fed the header-only
#             framing's readings vs the full framing's (reported; the target is +0.30)
#   choice    a variant replaces F if, averaged over both fold schemes, it gains >= 0.03 in at
#             least one gated dimension and loses no more than 0.01 in the other; among those,
#             the largest summed gain. A 215-item CV moves by +-0.03-0.06 on noise: this rule
#             is a screen, the test split is the measurement.
#   test      only the chosen variant, fitted on all dev items, scored once on all test items
#             (with the control on the test rule-violation items). Nothing else reads test.
import json, sys
import numpy as np
from probe_common import DIMS, load_labels, binof, binned, topic_folds, print_test_figures, fit, cv, score_variant

BLOCKS = [6, 10, 14, 18]
PIECES = {'A': 0, 'Q1': 1, 'Q2': 2}
VARIANTS = {
    'F': [('A', 14)],
    'A3': [('A', 10), ('A', 14), ('A', 18)],
    'A4': [('A', b) for b in BLOCKS],
    'Q': [('Q1', 14), ('Q1', 18), ('Q2', 14), ('Q2', 18)],
    'FQ': [('A', 14), ('Q1', 14), ('Q1', 18), ('Q2', 14), ('Q2', 18)],
    'ALL': [(p, b) for p in PIECES for b in BLOCKS],
}
labels = load_labels()


def readings(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        assert r['blocks'] == BLOCKS, r['blocks']
        out[r['item_id']] = np.array(r['means'], dtype=np.float64)  # [block][piece][dim]
    return out


def features(R, ids, variant):
    return np.array([np.concatenate([R[i][BLOCKS.index(b)][PIECES[p]] for p, b in VARIANTS[variant]]) for i in ids])


if sys.argv[1] == 'dev':
    Rf, Rh = readings(sys.argv[2]), readings(sys.argv[3])
    ids = sorted(i for i in Rf if labels[i][0]['split'] == 'dev')
    lang = np.array([labels[i][0]['lang'] for i in ids]); cat = np.array([labels[i][0]['category'] for i in ids])
    rv = cat == 'rule_violation'; has_c = np.array([i in Rh for i in ids])
    print(f'n {len(ids)} dev items, {rv.sum()} rule violations, {has_c.sum()} with a header-only reading')
    assert (has_c == rv).all(), 'every rule-violation item needs its header-only reading'
    tg = topic_folds(labels, ids)
    for dim in DIMS:
        yb = np.array([binof(labels[i][1][dim]) for i in ids])
        print(f'majority bin {dim}: {(yb == np.bincount(yb).argmax()).mean():.3f}')
    summary = {}
    for v in VARIANTS:
        X = features(Rf, ids, v)
        Xc = np.array([features(Rh, [i], v)[0] if i in Rh else np.zeros(X.shape[1]) for i in ids])
        res = score_variant(v, X, Xc, has_c, ids, labels, lang, rv, tg, cv)
        summary[v] = {d: float(np.mean([res[(d, s)][0] for s in ['topic', 'lang']])) for d in DIMS}
    print('mean over both fold schemes:', {v: {d: round(x, 3) for d, x in s.items()} for v, s in summary.items()})
    base = summary['F']; ok = {}
    for v in VARIANTS:
        if v == 'F': continue
        g = {d: summary[v][d] - base[d] for d in DIMS}
        if max(g.values()) >= 0.03 and min(g.values()) >= -0.01: ok[v] = sum(g.values())
    print('qualify:', {v: round(x, 3) for v, x in ok.items()})
    print('chosen:', max(ok, key=ok.get) if ok else 'F (no variant qualifies)')
elif sys.argv[1] == 'test':
    Rd, Rt, Rh, v = readings(sys.argv[2]), readings(sys.argv[3]), readings(sys.argv[4]), sys.argv[5]
    dev = sorted(i for i in Rd if labels[i][0]['split'] == 'dev')
    test = sorted(i for i in Rt if labels[i][0]['split'] == 'test')
    lang = np.array([labels[i][0]['lang'] for i in test]); rv = np.array([labels[i][0]['category'] == 'rule_violation' for i in test])
    print(f'variant {v}: fitted on {len(dev)} dev items, scored on {len(test)} test items')
    Xd, Xt = features(Rd, dev, v), features(Rt, test, v)
    for dim in DIMS:
        yd = np.array([labels[i][1][dim] for i in dev]); yt = np.array([binof(labels[i][1][dim]) for i in test])
        pred, lo, hi = fit(Xd, yd)
        pb = binned(pred(Xt), lo, hi)
        print_test_figures(f'{dim}', yt, pb, lang, np.array([binof(s) for s in yd]))
        if dim == 'faithfulness':
            rids = [i for i in test if labels[i][0]['category'] == 'rule_violation']
            missing = [i for i in rids if i not in Rh]
            assert not missing, f'no header-only reading for {missing}'
            pc = binned(pred(features(Rh, rids, v)), lo, hi); yr = yt[rv]
            print(f'  control ({len(rids)} rule-violation items): full {(pb[rv] == yr).mean():.3f} header-only {(pc == yr).mean():.3f}')
