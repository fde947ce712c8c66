#!/usr/bin/env python3
# Experiment (issue 14, 2026-12-06, thirteenth sitting; docs/calibration.md, "probe-v1 plus the
# checks-v2 signals"): does adding checks-v2's model-free surface evidence (and, at a cost, its
# support likelihood) to probe-v1's middle-layer reading move the agreement? Needs numpy and
# scikit-learn.
#
#   dev:  python3 scripts/experiments/probe_plus_evidence.py dev PROBE_DEV.json HEADER_DEV.json SIGNALS_DEV.json
#   test: python3 scripts/experiments/probe_plus_evidence.py test PROBE_DEV.json SIGNALS_DEV.json \
#             PROBE_TEST.json SIGNALS_TEST.json VARIANT_GROUNDEDNESS VARIANT_FAITHFULNESS
#
# PROBE_*.json: judge-scores.json of `cardinal calibrate --scorer probe-v1` (the items' `probe`
# features); HEADER_DEV.json: the same run on a labels copy whose every item is a rule
# violation (probe_rules_diff.py's `reframe`), for the header-only control readings of all dev
# items; SIGNALS_*.json: judge-scores of `cardinal calibrate --scorer checks-v2` (the committed
# report folder 2026-12-05-checks-v2-dev215-qwen2.5-coder-1.5b holds both splits).
#
# Pre-registered before any result was seen (written and committed before the dev run):
#   variants  F    probe-v1 as committed: standardise, PCA 32, ridge alpha 10, cut points in-fold
#             FE   F's 32 components + the three evidence features (coverage mean, coverage min,
#                  new numbers), standardised in-fold, same ridge and cut points
#             FES  FE + the support likelihood (support_pmi)
#             FESC FES + the checks' raw groundedness and faithfulness
#             ES   the evidence and support likelihood alone in the same ridge (reference)
#   folds     topic-grouped 10 folds (seed 0) and one language held out (probe_rules_diff.py's)
#   choice    per gated dimension, a variant replaces F only if its agreement, averaged over
#             both fold schemes, is >= F's + 0.03 (a 215-item CV moves by +-0.03-0.06 on noise);
#             among those the highest, except that FE is preferred to a costlier variant within
#             0.01 of it (the evidence is free; the support likelihood costs two prompt passes).
#   test      only the chosen variants, fitted on all dev items, scored once on the test split.
import json, sys, glob
import numpy as np
from probe_common import DIMS, load_labels, binof, cuts_fit, binned, kappa_q, topic_folds, print_test_figures, ProbePlus

labels = load_labels()


def probes(path, framing):
    return {s['item_id']: s['probe'] for s in json.load(open(path))['items']
            if s['framing'] == framing and s.get('probe')}


def signals(path):
    out = {}
    for s in json.load(open(path))['items']:
        if s['framing'] != 'full_card' or not s.get('signals'):
            continue
        sig = s['signals']; ev = sig['evidence']
        raw = s['verdicts']['faithfulness'].get('detail', {}).get('raw', {})
        out[s['item_id']] = ([ev['coverage_mean'], ev['coverage_min'], -ev['new_numbers']],
                             [sig['support_pmi']],
                             [raw.get('groundedness', 0.5), raw.get('faithfulness', 0.5)])
    return out


def extras(sig, ids, variant):
    cols = []
    for i in ids:
        e, s, c = sig[i]
        cols.append({'F': [], 'FE': e, 'FES': e + s, 'FESC': e + s + c, 'ES': e + s}[variant])
    return np.array(cols, float).reshape(len(ids), -1)


def fit_dim(variant, X, E, y):
    m = ProbePlus(variant != 'ES').fit(X, E, y)
    lo, hi = cuts_fit(m.predict(X, E), y)
    return m, lo, hi


if sys.argv[1] == 'dev':
    F = probes(sys.argv[2], 'full_card'); H = probes(sys.argv[3], 'header_only'); sig = signals(sys.argv[4])
    ids = sorted(i for i in F if i in H and i in sig and labels[i][0]['split'] == 'dev')
    print('dev items', len(ids))
    Fm = np.array([F[i] for i in ids]); Hm = np.array([H[i] for i in ids])
    lang = np.array([labels[i][0]['lang'] for i in ids]); cat = np.array([labels[i][0]['category'] for i in ids])
    tg = topic_folds(labels, ids); rv = cat == 'rule_violation'
    summary = {}
    for variant in ['F', 'FE', 'FES', 'FESC', 'ES']:
        E = extras(sig, ids, variant)
        for dim in DIMS:
            y = np.array([labels[i][1][dim] for i in ids]); yb = np.array([binof(v) for v in y])
            accs = []
            for sname, groups in [('topic', tg), ('lang', lang)]:
                pb = np.zeros(len(y), int); pc = np.zeros(len(y), int)
                for g in np.unique(groups):
                    te = groups == g; tr = ~te
                    m, lo, hi = fit_dim(variant, Fm[tr], E[tr], y[tr])
                    pb[te] = binned(m.predict(Fm[te], E[te]), lo, hi); pc[te] = binned(m.predict(Hm[te], E[te]), lo, hi)
                a = (pb == yb).mean(); accs.append(a)
                per = {l: round(float((pb[lang == l] == yb[lang == l]).mean()), 3) for l in np.unique(lang)}
                ctl = ''
                if dim == 'faithfulness':
                    ctl = f'  control full {(pb[rv] == yb[rv]).mean():.3f} header {(pc[rv] == yb[rv]).mean():.3f}'
                print(f'{variant:5s} {dim:13s} {sname:5s} {a:.3f} kq {kappa_q(yb, pb):.2f} {per}{ctl}')
            summary[(variant, dim)] = float(np.mean(accs))
    for dim in DIMS:
        base = summary[('F', dim)]
        ok = {v: summary[(v, dim)] for v in ['FE', 'FES', 'FESC', 'ES'] if summary[(v, dim)] >= base + 0.03}
        print(dim, {v: round(summary[(v, dim)], 3) for v in ['F', 'FE', 'FES', 'FESC', 'ES']})
        if not ok:
            print(f'  chosen for {dim}: F (no variant qualifies)')
            continue
        best = max(ok, key=ok.get)
        if 'FE' in ok and ok['FE'] >= ok[best] - 0.01:
            best = 'FE'
        print(f'  chosen for {dim}: {best}')
elif sys.argv[1] == 'test':
    Fd = probes(sys.argv[2], 'full_card'); sd = signals(sys.argv[3])
    Ft = probes(sys.argv[4], 'full_card'); Ht = probes(sys.argv[4], 'header_only'); st = signals(sys.argv[5])
    chosen = dict(zip(DIMS, sys.argv[6:8]))
    dev = sorted(i for i in Fd if i in sd and labels[i][0]['split'] == 'dev')
    test = sorted(i for i in Ft if i in st and labels[i][0]['split'] == 'test')
    assert not set(dev) & set(test)
    print('dev items', len(dev), 'test items', len(test))
    lang = np.array([labels[i][0]['lang'] for i in test]); cat = np.array([labels[i][0]['category'] for i in test])
    for dim in DIMS:
        variant = chosen[dim]
        yd = np.array([labels[i][1][dim] for i in dev])
        m, lo, hi = fit_dim(variant, np.array([Fd[i] for i in dev]), extras(sd, dev, variant), yd)
        yt = np.array([binof(labels[i][1][dim]) for i in test])
        Et = extras(st, test, variant)
        pb = binned(m.predict(np.array([Ft[i] for i in test]), Et), lo, hi)
        print_test_figures(f'{dim} {variant}', yt, pb, lang, [binof(labels[i][1][dim]) for i in dev])
        if dim == 'faithfulness':
            rvi = [k for k, i in enumerate(test) if cat[k] == 'rule_violation' and i in Ht]
            ids_rv = [test[k] for k in rvi]
            pf = pb[rvi]
            ph = binned(m.predict(np.array([Ht[i] for i in ids_rv]), extras(st, ids_rv, variant)), lo, hi)
            print(f'  control on {len(rvi)} rule-violation items: full {(pf == yt[rvi]).mean():.3f} header {(ph == yt[rvi]).mean():.3f}')
else:
    sys.exit('usage: see the header')
