#!/usr/bin/env python3
# Experiment (issue 14, 2026-12-07, eighteenth sitting; docs/calibration.md, "how much the
# rules make each sentence less expected"): probe-v1 reads the same with and without the rules
# (ADR-0029's control fails), and its faithfulness did not carry to answers by other writers.
# A reading whose construct is the rules by design: each answer sentence's mean log-probability
# per token as the judge model's own reply to the question, with the cited cards' rules in the
# system message and with no card (`probe_rule_pmi` example). A sentence that does what a rule
# forbids should become less expected once the rule is stated; the rule likelihood ratio is
# rp = lp_rules - lp_none per sentence (nats per token). Needs numpy and scikit-learn.
#
# Amended before any reading was analysed (the first dev items ran at ~20 s each, too slow for
# 370 items in this sitting): the facts pass (a per-sentence support likelihood, sp) is dropped
# — checks-v2's support likelihood added nothing to probe-v1 on dev (probe_plus_evidence.py) —
# and with it the variants FRS and RS; RS becomes R (the rule features alone). The items are
# read in a fixed pseudo-random order (a hash of the id); if the dev run cannot finish in this
# sitting (~15 s per item on this machine), the analysis below runs on the items read by then,
# a random sample of the dev split, and says how many.
#
#   dev:  python3 scripts/experiments/probe_rule_pmi.py dev DEV_FULL.jsonl DEV_HEADER.jsonl
#   test: python3 scripts/experiments/probe_rule_pmi.py test DEV_FULL.jsonl TEST_FULL.jsonl \
#             TEST_HEADER.jsonl VARIANT
#
# Pre-registered before any result was seen (written and committed before the dev readings
# were analysed):
#   item features  F       probe-v1's reading (the token-weighted mean of the sentences' block-14
#                          means = probe-v1's feature vector)
#                  rp_min  the lowest rp over the answer's sentences; rp_mean their token-weighted
#                          mean. No rule read (a cited card without rules; the header-only
#                          framing of the control): both 0 ("the rules changed nothing").
#   variants  F     probe-v1's pipeline (standardise, PCA 32, ridge alpha 10, cut points in-fold)
#             FR    F's 32 components + rp_min, rp_mean (standardised in-fold, same ridge)
#             R     rp_min, rp_mean alone in the same ridge (reference)
#   folds     all dev items (v2 and the extension): topic-grouped 10 folds (seed 0) and one
#             language held out; the ADR-0029 control out of fold on the dev rule-violation items
#             (the header-only readings: probe header-only features, rp = 0).
#   writers   reported beside the folds: fitted on the v2 dev items only, scored on the
#             extension items (other writers).
#   choice    a variant replaces F if, averaged over both fold schemes, either (a) it gains
#             >= 0.03 in one gated dimension and loses <= 0.01 in the other, or (b) its
#             faithfulness is >= F's - 0.01 and its control difference is >= +0.15; and in
#             either case its faithfulness on the other writers' items is >= F's - 0.02. Among
#             (b) the largest control difference, else among (a) the largest summed gain.
#   test      only the chosen variant, fitted on all dev items, scored once on all test items.
import json, sys
import numpy as np
from probe_common import (DIMS, load_labels, binof, binned, cuts_fit, topic_folds,
                          print_test_figures, score_variant, ProbePlus, probe_vector)

VARIANTS = ['F', 'FR', 'R']
labels = load_labels()


def readings(path):
    """item id -> (probe vector, [rp_min, rp_mean])."""
    out = {}
    for line in open(path):
        r = json.loads(line); ps = r['pieces']
        f, w = probe_vector(ps)
        if any(p.get('lp_rules') is None or p.get('lp_none') is None for p in ps):
            rp = [0.0, 0.0]
        else:
            d = np.array([p['lp_rules'] - p['lp_none'] for p in ps])
            rp = [float(d.min()), float((d * w).sum() / w.sum())]
        out[r['item_id']] = (f, rp)
    return out


def extras(E, v):
    return {'F': E[:, :0], 'FR': E, 'R': E}[v]


def fit_v(v, X, E, y):
    m = ProbePlus(v != 'R').fit(X, extras(E, v), y)
    lo, hi = cuts_fit(m.predict(X, extras(E, v)), y)
    return lambda A, B: binned(m.predict(A, extras(B, v)), lo, hi)


def cv_of(v):
    """probe_common.cv for variant v, on rows [probe vector | rp_min, rp_mean]."""
    def cv(XE, XEc, has_c, y, groups):
        pb = np.zeros(len(y), int); pc = np.full(len(y), -1)
        for g in np.unique(groups):
            te = groups == g; tr = ~te
            f = fit_v(v, XE[tr, :-2], XE[tr, -2:], y[tr])
            pb[te] = f(XE[te, :-2], XE[te, -2:]); pc[te] = f(XEc[te, :-2], XEc[te, -2:])
        return pb, pc
    return cv


def auc(score, pos):
    """P(a positive scores lower than a negative): low likelihood ratio = violation."""
    s_pos, s_neg = score[pos], score[~pos]
    return float(np.mean([(a < b) + 0.5 * (a == b) for a in s_pos for b in s_neg]))


def spearman(a, b):
    ra = np.argsort(np.argsort(a)); rb = np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


if sys.argv[1] == 'dev':
    R = readings(sys.argv[2]); H = readings(sys.argv[3])
    ids = sorted(i for i in R if labels[i][0]['split'] == 'dev')
    print('dev items', len(ids), 'header-only readings', len(H))
    X = np.array([R[i][0] for i in ids]); E = np.array([R[i][1] for i in ids])
    Xc = np.array([H[i][0] if i in H else R[i][0] for i in ids])
    Ec = np.array([H[i][1] if i in H else R[i][1] for i in ids]); Ec[:, :2] = 0.0
    has_c = np.array([i in H for i in ids])
    lang = np.array([labels[i][0]['lang'] for i in ids]); cat = np.array([labels[i][0]['category'] for i in ids])
    rv = (cat == 'rule_violation') & has_c; tg = topic_folds(labels, ids)
    ext = np.array([i.startswith('cal3-') for i in ids])
    m = (E[:, 0] != 0.0) | (E[:, 1] != 0.0)  # items whose rules were read
    yf = np.array([labels[i][1]['faithfulness'] for i in ids]); yg = np.array([labels[i][1]['groundedness'] for i in ids])
    for k, name in enumerate(['rp_min', 'rp_mean']):
        print(f'{name:8s} rule violation vs rest AUC {auc(E[m, k], (cat == "rule_violation")[m]):.3f} '
              f'rho faithfulness {spearman(E[m, k], yf[m]):+.3f} groundedness {spearman(E[m, k], yg[m]):+.3f} (n {m.sum()})')
    res = {}
    XE, XEc = np.hstack([X, E]), np.hstack([Xc, Ec])
    for v in VARIANTS:
        res.update({(v,) + k: r for k, r in score_variant(v, XE, XEc, has_c, ids, labels, lang, rv, tg, cv_of(v)).items()})
        for dim in DIMS:
            y = np.array([labels[i][1][dim] for i in ids]); yb = np.array([binof(s) for s in y])
            f = fit_v(v, X[~ext], E[~ext], y[~ext]); pw = f(X[ext], E[ext])
            res[(v, dim, 'writers')] = ((pw == yb[ext]).mean(), 0.0)
            print(f'{v:4s} {dim:13s} other writers {(pw == yb[ext]).mean():.3f} (n {ext.sum()})')
    avg = lambda v, dim, k: np.mean([res[(v, dim, s)][k] for s in ('topic', 'lang')])
    base = {d: avg('F', d, 0) for d in DIMS}; cands_a, cands_b = {}, {}
    for v in VARIANTS[1:]:
        g = {d: avg(v, d, 0) - base[d] for d in DIMS}; ctl = avg(v, 'faithfulness', 1)
        writers_ok = res[(v, 'faithfulness', 'writers')][0] >= res[('F', 'faithfulness', 'writers')][0] - 0.02
        print(f'{v}: gains {g["groundedness"]:+.3f} / {g["faithfulness"]:+.3f}, control {ctl:+.3f}, writers ok {writers_ok}')
        if not writers_ok: continue
        if g['faithfulness'] >= -0.01 and ctl >= 0.15: cands_b[v] = ctl
        if any(g[a] >= 0.03 and g[b] >= -0.01 for a, b in [DIMS, DIMS[::-1]]): cands_a[v] = sum(g.values())
    chosen = max(cands_b, key=cands_b.get) if cands_b else (max(cands_a, key=cands_a.get) if cands_a else 'F')
    print('chosen:', chosen)
else:
    D = readings(sys.argv[2]); T = readings(sys.argv[3]); TH = readings(sys.argv[4]); v = sys.argv[5]
    dids = sorted(i for i in D if labels[i][0]['split'] == 'dev')
    tids = sorted(i for i in T if labels[i][0]['split'] == 'test')
    X = np.array([D[i][0] for i in dids]); E = np.array([D[i][1] for i in dids])
    Xt = np.array([T[i][0] for i in tids]); Et = np.array([T[i][1] for i in tids])
    lang = np.array([labels[i][0]['lang'] for i in tids]); cat = np.array([labels[i][0]['category'] for i in tids])
    rv = np.array([c == 'rule_violation' and i in TH for c, i in zip(cat, tids)])
    for dim in DIMS:
        y = np.array([labels[i][1][dim] for i in dids]); yt = np.array([binof(labels[i][1][dim]) for i in tids])
        f = fit_v(v, X, E, y); pb = f(Xt, Et)
        print_test_figures(f'{v} {dim}', yt, pb, lang, np.array([binof(s) for s in y]))
        if dim == 'faithfulness':
            ridx = np.where(rv)[0]
            Xc = np.array([TH[tids[k]][0] for k in ridx]); Ec = np.array([TH[tids[k]][1] for k in ridx]); Ec[:, :2] = 0.0
            pc = f(Xc, Ec)
            print(f'  control on {len(ridx)} rule-violation items: full {(pb[ridx] == yt[ridx]).mean():.3f} header-only {(pc == yt[ridx]).mean():.3f}')
