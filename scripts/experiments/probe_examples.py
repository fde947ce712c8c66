#!/usr/bin/env python3
# Experiment (issue 14, 2026-12-07, nineteenth sitting; docs/calibration.md, "worked examples
# before the case"): probe-v1's reading with three short worked examples in the system message
# (`probe_examples` example). The issue lists worked examples among the variants to try; the
# examples show faithfulness decided by the card's rules, not by how the answer sounds. Needs
# numpy and scikit-learn.
#
#   dev:  python3 scripts/experiments/probe_examples.py dev RULEPMI_FULL RULEPMI_HEADER \
#             EXAMPLES_FULL EXAMPLES_HEADER
#   test: python3 scripts/experiments/probe_examples.py test DEV_EXAMPLES_FULL \
#             TEST_EXAMPLES_FULL TEST_EXAMPLES_HEADER
#
# Pre-registered before any reading was taken (committed with the example):
#   items     the dev items of the eighteenth sitting's probe_rule_pmi run (a pre-registered
#             random sample of 224 of the 370), in its order; if this sitting cannot read them
#             all (~8 s per item here), the items read by then — a random sample again — and
#             the analysis says how many. The control: the rule-violation items among them
#             read header-only by both runs.
#   features  F  probe-v1's reading, from probe_rule_pmi's per-sentence output (the
#                token-weighted mean of the sentences' block-14 means = probe-v1's vector)
#             W  the same reading with the worked examples in the system message
#   variants  F and W, each through probe-v1's pipeline (standardise, PCA 32, ridge alpha 10,
#             cut points in-fold); no combination.
#   folds     topic-grouped 10 folds (seed 0) and one language held out; the ADR-0029 control
#             out of fold; the other writers (fitted on v2 dev items, scored on the extension).
#   choice    W replaces F if, averaged over both fold schemes, either (a) it gains >= 0.03 in
#             one gated dimension and loses <= 0.01 in the other, or (b) its faithfulness is
#             >= F's - 0.01 and its control difference is >= +0.15; and in either case its
#             faithfulness on the other writers' items is >= F's - 0.02.
#   test      only if W is chosen: fitted on the dev items read, scored once on all test items.
#
# Added in the twentieth sitting, after W was chosen on dev and before its test reading was
# analysed (committed first):
#   same-fit  F's test reading (`probe_examples --no-examples`, probe-v1's vector) fitted on the
#             same dev items as W, scored once on the same test items and controls. A diagnostic:
#             the committed probe-v1 is fitted on 370 dev items, W on the 158 read, so the
#             comparison of W with the figure of record mixes the examples with the fit's size.
#   then      W is worth a project scorer (read on all 370 dev items, refitted, scored by the
#             project's own code) only if on test it gains >= 0.02 over same-fit F in one gated
#             dimension and loses <= 0.01 in the other; otherwise probe-v1 stays, and W is
#             reported as tried.
#
# Added in the twentieth sitting, before any reading with native instructions was taken
# (committed first): the "per-language instructions" variant.
#   features  N  probe-v1's reading (no worked examples) with its system message written in the
#                answer's language for es-419 and pt-BR items (`probe_examples --no-examples
#                --instructions native`); English items keep probe-v1's prompt, so N equals F
#                there (the analysis prints how closely the two readings agree on them)
#   items     the same dev items as W, in the same order; if the sitting cannot read them all,
#             the items read by then (the analysis says how many)
#   rule      the dev comparison, folds, control, writers check and choice rule above, with N in
#             place of W; test only if N is chosen (fitted on the dev items read, scored once)
#
#   native:  python3 scripts/experiments/probe_examples.py native RULEPMI_FULL RULEPMI_HEADER \
#             NATIVE_FULL NATIVE_HEADER
#   samefit: python3 scripts/experiments/probe_examples.py samefit RULEPMI_FULL DEV_EXAMPLES_FULL \
#             TEST_F_FULL TEST_F_HEADER TEST_EXAMPLES_FULL TEST_EXAMPLES_HEADER
import json, sys
import numpy as np
from probe_common import (DIMS, load_labels, binof, topic_folds, fit, binned,
                          print_test_figures, score_variant, probe_vector, bootstrap_ci)

labels = load_labels()


def probe_v1(path):
    """item id -> probe-v1's vector, from probe_rule_pmi's per-sentence output."""
    out = {}
    for line in open(path):
        r = json.loads(line)
        out[r['item_id']] = probe_vector(r['pieces'])[0]
    return out


def examples(path):
    """item id -> the worked-examples reading."""
    return {r['item_id']: np.array(r['mean'], float) for r in map(json.loads, open(path))}


def dev_compare(F, FH, V, VH, v):
    """The pre-registered dev comparison of variant `v` (readings V, header-only VH) with F
    (probe-v1's readings F, FH): prints every figure and whether the choice rule picks `v`."""
    ids = sorted(i for i in V if i in F and labels[i][0]['split'] == 'dev')
    print('dev items read by both', len(ids), 'of', len(F))
    lang = np.array([labels[i][0]['lang'] for i in ids]); cat = np.array([labels[i][0]['category'] for i in ids])
    has_c = np.array([i in FH and i in VH for i in ids])
    rv = (cat == 'rule_violation') & has_c; tg = topic_folds(labels, ids)
    ext = np.array([i.startswith('cal3-') for i in ids])
    print('rule-violation items with both controls', rv.sum(), '; other writers', ext.sum())
    res = {}
    for name, R, RH in [('F', F, FH), (v, V, VH)]:
        X = np.array([R[i] for i in ids]); Xc = np.array([RH[i] if h else R[i] for i, h in zip(ids, has_c)])
        res.update({(name,) + k: r for k, r in score_variant(name, X, Xc, has_c, ids, labels, lang, rv, tg).items()})
        for dim in DIMS:
            y = np.array([labels[i][1][dim] for i in ids]); yb = np.array([binof(s) for s in y])
            pred, lo, hi = fit(X[~ext], y[~ext]); pw = binned(pred(X[ext]), lo, hi)
            res[(name, dim, 'writers')] = ((pw == yb[ext]).mean(), 0.0)
            print(f'{name:4s} {dim:13s} other writers {(pw == yb[ext]).mean():.3f} (n {ext.sum()})')
    for dim in DIMS:
        yb = np.array([binof(labels[i][1][dim]) for i in ids])
        print(f'majority bin {dim}: {(yb == np.bincount(yb).argmax()).mean():.3f}')
    avg = lambda w, dim, k: np.mean([res[(w, dim, s)][k] for s in ('topic', 'lang')])
    g = {d: avg(v, d, 0) - avg('F', d, 0) for d in DIMS}; ctl = avg(v, 'faithfulness', 1)
    writers_ok = res[(v, 'faithfulness', 'writers')][0] >= res[('F', 'faithfulness', 'writers')][0] - 0.02
    a = any(g[x] >= 0.03 and g[z] >= -0.01 for x, z in [DIMS, DIMS[::-1]])
    b = g['faithfulness'] >= -0.01 and ctl >= 0.15
    print(f'{v}: gains {g["groundedness"]:+.3f} / {g["faithfulness"]:+.3f}, control {ctl:+.3f} '
          f'(F {avg("F", "faithfulness", 1):+.3f}), writers ok {writers_ok}')
    print('chosen:', v if writers_ok and (a or b) else 'F')
    return ids


def test_figures(name, D, T, TH):
    """Fit on D's dev items, score once on T's test items (TH: the header-only control);
    the test bins per dimension."""
    dids = sorted(i for i in D if labels[i][0]['split'] == 'dev')
    tids = sorted(i for i in T if labels[i][0]['split'] == 'test')
    X = np.array([D[i] for i in dids]); Xt = np.array([T[i] for i in tids])
    lang = np.array([labels[i][0]['lang'] for i in tids]); cat = np.array([labels[i][0]['category'] for i in tids])
    rv = np.array([c == 'rule_violation' and i in TH for c, i in zip(cat, tids)])
    print(f'{name}: fitted on {len(dids)} dev items, scored on {len(tids)} test items')
    out = {}
    for dim in DIMS:
        y = np.array([labels[i][1][dim] for i in dids]); yt = np.array([binof(labels[i][1][dim]) for i in tids])
        pred, lo, hi = fit(X, y); pb = binned(pred(Xt), lo, hi)
        print_test_figures(f'{name} {dim}', yt, pb, lang, np.array([binof(s) for s in y]))
        out[dim] = (tids, pb == yt)
        if dim == 'faithfulness':
            ridx = np.where(rv)[0]
            pc = binned(pred(np.array([TH[tids[k]] for k in ridx])), lo, hi)
            print(f'  control on {len(ridx)} rule-violation items: full {(pb[ridx] == yt[ridx]).mean():.3f} header-only {(pc == yt[ridx]).mean():.3f}')
    return out


if sys.argv[1] == 'dev':
    dev_compare(probe_v1(sys.argv[2]), probe_v1(sys.argv[3]), examples(sys.argv[4]), examples(sys.argv[5]), 'W')
elif sys.argv[1] == 'native':
    F, N = probe_v1(sys.argv[2]), examples(sys.argv[4])
    ids = dev_compare(F, probe_v1(sys.argv[3]), N, examples(sys.argv[5]), 'N')
    en = [i for i in ids if labels[i][0]['lang'] == 'en']
    if en:
        d = max(float(np.abs(N[i] - F[i]).max()) for i in en)
        cos = min(float(N[i] @ F[i] / np.linalg.norm(N[i]) / np.linalg.norm(F[i])) for i in en)
        print(f'English items (same prompt in N and F): largest difference {d:.4f}, lowest cosine {cos:.5f}')
elif sys.argv[1] == 'test':
    test_figures('W', examples(sys.argv[2]), examples(sys.argv[3]), examples(sys.argv[4]))
elif sys.argv[1] == 'samefit':
    F = probe_v1(sys.argv[2]); Wd = examples(sys.argv[3])
    Fd = {i: F[i] for i in Wd if i in F}
    f = test_figures('F same fit', Fd, examples(sys.argv[4]), examples(sys.argv[5]))
    w = test_figures('W', Wd, examples(sys.argv[6]), examples(sys.argv[7]))
    g = {}
    for dim in DIMS:
        assert f[dim][0] == w[dim][0], 'the two test readings hold different items'
        d = w[dim][1].astype(float) - f[dim][1].astype(float)
        lo, hi = bootstrap_ci(d); g[dim] = d.mean()
        print(f'W - F (same fit) {dim}: {d.mean():+.3f} [{lo:+.3f}, {hi:+.3f}] paired bootstrap')
    worth = any(g[x] >= 0.02 and g[z] >= -0.01 for x, z in [DIMS, DIMS[::-1]])
    print('W worth a project scorer:', worth)
else:
    sys.exit('usage: probe_examples.py dev|native|test|samefit FILES...')
