#!/usr/bin/env python3
# Experiment (issue 14, 2026-12-07, seventeenth sitting; docs/calibration.md, "the rules read
# again after the answer"): probe-v1 reads the answer, whose states cannot see anything after
# it, and the rules come before it. Here each rule of the cited cards is listed again after the
# answer (`probe_blocks --rules-after`), so each rule's tokens are read by a model that has read
# the answer: if the model compares rule and answer anywhere, it is there. Needs numpy and
# scikit-learn.
#
#   dev:  python3 scripts/experiments/probe_rules_after.py dev DEV_FULL.jsonl DEV_HEADER.jsonl
#   test: python3 scripts/experiments/probe_rules_after.py test DEV_FULL.jsonl TEST_FULL.jsonl \
#             TEST_HEADER.jsonl VARIANT
#
# Pieces of a reading: the answer, the line before the rules, then one piece per rule (none in
# the header-only framing). Blocks 14 and 18.
#
# Pre-registered before any result was seen (written and committed before the dev readings
# were analysed):
#   variants  F     the answer at block 14 (probe-v1)
#             FR14  F + the mean over the rule pieces at block 14
#             FR18  F + the mean over the rule pieces at block 18
#             FRM   F + the mean and the per-dimension maximum over the rule pieces at block 14
#             An item with no rule piece (a cited card without rules, or the header-only
#             framing of the control) gets the rule features' mean over the training rows that
#             have them (fitted in-fold): "no rule read" is the average rule reading. Then
#             probe-v1's pipeline unchanged (standardise, PCA 32, ridge alpha 10, cut points
#             in-fold).
#   folds     topic-grouped 10 folds (seed 0) and one language held out
#   control   out of fold on the dev rule-violation items, full framing vs header-only
#   choice    a variant replaces F if, averaged over both fold schemes, either (a) it gains
#             >= 0.03 in one gated dimension and loses <= 0.01 in the other, or (b) its
#             faithfulness is >= F's - 0.01 and its control difference is >= +0.15 (the
#             construct ADR-0029 asks for; F's is about 0). Among (b) the largest control
#             difference, else among (a) the largest summed gain.
#   test      only the chosen variant, fitted on all dev items, scored once on all test items.
import json, sys
import numpy as np
from probe_common import DIMS, load_labels, binof, binned, topic_folds, print_test_figures, fit, score_variant

VARIANTS = ['F', 'FR14', 'FR18', 'FRM']
labels = load_labels()


def readings(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        assert r['blocks'] == [14, 18] and r['rules_after'], (r['blocks'], r.get('rules_after'))
        m = np.array(r['means'], dtype=np.float64)  # [block][piece][dim]
        out[r['item_id']] = (m[0][0], m[:, 2:, :])  # F, rule pieces per block
    return out


def features(R, ids, v):
    rows = []
    for i in ids:
        f, rules = R[i]
        if v == 'F': rows.append(f); continue
        nan = np.full(f.shape, np.nan); has = rules.shape[1] > 0
        if v == 'FR14': extra = [rules[0].mean(0) if has else nan]
        elif v == 'FR18': extra = [rules[1].mean(0) if has else nan]
        else: extra = [rules[0].mean(0) if has else nan, rules[0].max(0) if has else nan]
        rows.append(np.concatenate([f] + extra))
    return np.array(rows)


def impute(Xtr, *others):
    """Fill missing rule features with the training rows' column means."""
    mu = np.nanmean(Xtr, axis=0); mu = np.where(np.isnan(mu), 0.0, mu)
    return [np.where(np.isnan(A), mu, A) for A in (Xtr,) + others]


def cv(X, Xc, has_c, y, groups):
    pb = np.zeros(len(y), int); pc = np.full(len(y), -1)
    for g in np.unique(groups):
        te = groups == g; tr = ~te
        Xtr, Xte, Xcte = impute(X[tr], X[te], Xc[te])
        pred, lo, hi = fit(Xtr, y[tr])
        pb[te] = binned(pred(Xte), lo, hi)
        tc = has_c[te]
        if tc.any(): pc[np.where(te)[0][tc]] = binned(pred(Xcte[tc]), lo, hi)
    return pb, pc


if sys.argv[1] == 'dev':
    Rf, Rh = readings(sys.argv[2]), readings(sys.argv[3])
    ids = sorted(i for i in Rf if labels[i][0]['split'] == 'dev')
    lang = np.array([labels[i][0]['lang'] for i in ids]); cat = np.array([labels[i][0]['category'] for i in ids])
    rv = cat == 'rule_violation'; has_c = np.array([i in Rh for i in ids])
    assert (has_c == rv).all(), 'every rule-violation item needs its header-only reading'
    norules = sum(Rf[i][1].shape[1] == 0 for i in ids)
    print(f'n {len(ids)} dev items, {rv.sum()} rule violations, {norules} with no rule piece; rule pieces per item {np.mean([Rf[i][1].shape[1] for i in ids]):.1f}')
    tg = topic_folds(labels, ids)
    summary = {}
    for v in VARIANTS:
        X = features(Rf, ids, v)
        Xc = np.array([features(Rh, [i], v)[0] if i in Rh else np.zeros(X.shape[1]) for i in ids])
        res = score_variant(v, X, Xc, has_c, ids, labels, lang, rv, tg, cv)
        summary[v] = {d: float(np.mean([res[(d, s)][0] for s in ['topic', 'lang']])) for d in DIMS}
        summary[v]['control'] = float(np.mean([res[('faithfulness', s)][1] for s in ['topic', 'lang']]))
    print('mean over both fold schemes:', {v: {d: round(x, 3) for d, x in s.items()} for v, s in summary.items()})
    base = summary['F']; a_ok = {}; b_ok = {}
    for v in VARIANTS[1:]:
        g = {d: summary[v][d] - base[d] for d in DIMS}
        if max(g.values()) >= 0.03 and min(g.values()) >= -0.01: a_ok[v] = sum(g.values())
        if g['faithfulness'] >= -0.01 and summary[v]['control'] >= 0.15: b_ok[v] = summary[v]['control']
    print('qualify (a):', a_ok, ' (b):', b_ok)
    print('chosen:', max(b_ok, key=b_ok.get) if b_ok else (max(a_ok, key=a_ok.get) if a_ok else 'F (no variant qualifies)'))
elif sys.argv[1] == 'test':
    Rd, Rt, Rh, v = readings(sys.argv[2]), readings(sys.argv[3]), readings(sys.argv[4]), sys.argv[5]
    dev = sorted(i for i in Rd if labels[i][0]['split'] == 'dev')
    test = sorted(i for i in Rt if labels[i][0]['split'] == 'test')
    lang = np.array([labels[i][0]['lang'] for i in test]); rv = np.array([labels[i][0]['category'] == 'rule_violation' for i in test])
    rids = [i for i in test if labels[i][0]['category'] == 'rule_violation']
    assert all(i in Rh for i in rids), 'every rule-violation test item needs its header-only reading'
    print(f'variant {v}: fitted on {len(dev)} dev items, scored on {len(test)} test items')
    Xd, Xt, Xc = impute(features(Rd, dev, v), features(Rt, test, v), features(Rh, rids, v))
    for dim in DIMS:
        yd = np.array([labels[i][1][dim] for i in dev]); yt = np.array([binof(labels[i][1][dim]) for i in test])
        pred, lo, hi = fit(Xd, yd)
        pb = binned(pred(Xt), lo, hi)
        print_test_figures(dim, yt, pb, lang, np.array([binof(s) for s in yd]))
        if dim == 'faithfulness':
            pc = binned(pred(Xc), lo, hi); yr = yt[rv]
            print(f'  control ({len(rids)} rule-violation items): full {(pb[rv] == yr).mean():.3f} header-only {(pc == yr).mean():.3f}')
