#!/usr/bin/env python3
# Experiment (issue 14, 2026-12-06; docs/calibration.md, "what the rules' text changes in the
# reading"): is the difference between probe-v1's full-card and header-only readings of the
# answer a judge of rule violations? Dev items only; needs numpy and scikit-learn.
#
#   1. python3 scripts/experiments/probe_rules_diff.py reframe DIR
#      writes a copy of data/calibration in DIR whose every item is marked rule_violation, so
#      that `cardinal calibrate` reads the header-only control for every item;
#   2. cardinal calibrate --scorer probe-v1 --split dev --labels DIR --out OUT
#      (the full-card readings of the fit run are cached; OUT is an experiment, not a report:
#      its labels are not the corpus's);
#   3. python3 scripts/experiments/probe_rules_diff.py FULL.json OUT/judge-scores.json
#      where FULL.json is a dev run of `cardinal calibrate --scorer probe-v1` on the real labels.
import json, sys, glob
if len(sys.argv) == 3 and sys.argv[1] == 'reframe':
    import os, shutil
    os.makedirs(sys.argv[2], exist_ok=True)
    shutil.copy('data/calibration/RUBRIC.md', sys.argv[2])
    for path in glob.glob('data/calibration/*.jsonl'):
        with open(os.path.join(sys.argv[2], os.path.basename(path)), 'w') as out:
            for line in open(path):
                d = json.loads(line)
                if d['category'] != 'rule_violation':
                    d['category'] = 'rule_violation'; d['severity'] = 'explicit'
                    if d.get('faulty_position') == 'none': d['faulty_position'] = 'first'
                    d.setdefault('header_check', 'experiment: every item reframed')
                out.write(json.dumps(d, ensure_ascii=False) + '\n')
    sys.exit(0)
# Dev-only: does the difference between the full-card and the header-only block-14 readings
# carry the rule construct (ADR-0029)? Pre-registered before any result was seen (2026-12-06):
#   variants  F (probe-v1 as committed), D = F - H, FD = [F, D], H (reference only)
#   pipeline  standardise, PCA 32, ridge alpha 10, cut points in-fold (probe-v1's, unchanged)
#   folds     topic-grouped 10 folds (seed 0) and one language held out
#   control   out of fold on the dev rule-violation items: the same model fed the header-only
#             framing's features (F -> H, D -> 0) vs the full framing's
#   choice    a variant replaces F only if its control difference (mean of both fold schemes)
#             is >= +0.10 AND its faithfulness agreement (mean of both schemes) is >= F's - 0.02;
#             among those the highest faithfulness agreement. Nothing is read from test.
import numpy as np
from probe_common import DIMS, load_labels, binof, cuts_fit, binned, kappa_q, topic_folds
from sklearn.preprocessing import StandardScaler
from sklearn.decomposition import PCA
from sklearn.linear_model import Ridge, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.metrics import roc_auc_score
full = json.load(open(sys.argv[1])); head = json.load(open(sys.argv[2]))
labels = load_labels()
F = {s['item_id']: s['probe'] for s in full['items'] if s['framing'] == 'full_card' and s.get('probe')}
H = {s['item_id']: s['probe'] for s in head['items'] if s['framing'] == 'header_only' and s.get('probe')}
ids = sorted(i for i in F if i in H and labels[i][0]['split'] == 'dev')
print('n', len(ids))
Fm = np.array([F[i] for i in ids]); Hm = np.array([H[i] for i in ids]); Dm = Fm - Hm
lang = np.array([labels[i][0]['lang'] for i in ids]); cat = np.array([labels[i][0]['category'] for i in ids])
cos = (Fm * Hm).sum(1) / np.linalg.norm(Fm, axis=1) / np.linalg.norm(Hm, axis=1)
print('cosine F,H: mean %.4f min %.4f; |D|/|F| mean %.3f' % (cos.mean(), cos.min(), (np.linalg.norm(Dm, axis=1) / np.linalg.norm(Fm, axis=1)).mean()))
variants = {
    'F': (lambda: Fm, lambda: Hm),
    'D': (lambda: Dm, lambda: np.zeros_like(Dm)),
    'FD': (lambda: np.hstack([Fm, Dm]), lambda: np.hstack([Hm, np.zeros_like(Dm)])),
    'H': (lambda: Hm, lambda: Hm),
}
def cv(X, Xc, groups, dim):
    y = np.array([labels[i][1][dim] for i in ids]); yb = np.array([binof(v) for v in y])
    pb = np.zeros(len(y), int); pc = np.zeros(len(y), int)
    for g in np.unique(groups):
        te = groups == g; tr = ~te
        m = make_pipeline(StandardScaler(), PCA(32, svd_solver='full'), Ridge(alpha=10)).fit(X[tr], y[tr])
        lo, hi = cuts_fit(m.predict(X[tr]), y[tr])
        pb[te] = binned(m.predict(X[te]), lo, hi); pc[te] = binned(m.predict(Xc[te]), lo, hi)
    rv = cat == 'rule_violation'
    return (pb == yb).mean(), {l: round((pb[lang == l] == yb[lang == l]).mean(), 3) for l in np.unique(lang)}, (pb[rv] == yb[rv]).mean(), (pc[rv] == yb[rv]).mean()
tg = topic_folds(labels, ids)
rvy = (cat == 'rule_violation').astype(int)
summary = {}
for name, (fx, fc) in variants.items():
    X, Xc = fx(), fc()
    sc = np.zeros(len(rvy))
    for g in np.unique(tg):
        te = tg == g; tr = ~te
        m = make_pipeline(StandardScaler(), PCA(32, svd_solver='full'), LogisticRegression(C=0.1, max_iter=3000)).fit(X[tr], rvy[tr]); sc[te] = m.decision_function(X[te])
    print(f'== {name}: rule-violation AUC topic-grouped {roc_auc_score(rvy, sc):.3f}')
    res = {}
    for dim in ['groundedness', 'faithfulness']:
        for sname, groups in [('topic', tg), ('lang', lang)]:
            a, per, cf, ch = cv(X, Xc, groups, dim)
            res[(dim, sname)] = (a, cf - ch)
            print(f'  {dim:13s} {sname:5s} agreement {a:.3f} {per}  control full {cf:.3f} header {ch:.3f} diff {cf-ch:+.3f}')
    summary[name] = (np.mean([res[('faithfulness', s)][0] for s in ['topic', 'lang']]), np.mean([res[('faithfulness', s)][1] for s in ['topic', 'lang']]), np.mean([res[('groundedness', s)][0] for s in ['topic', 'lang']]))
print('summary (faithfulness agreement, control diff, groundedness agreement):', {k: tuple(round(float(x), 3) for x in v) for k, v in summary.items()})
base = summary['F'][0]
ok = [k for k in ['D', 'FD'] if summary[k][1] >= 0.10 and summary[k][0] >= base - 0.02]
print('chosen:', max(ok, key=lambda k: summary[k][0]) if ok else 'F (no variant qualifies)')
