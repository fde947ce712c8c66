#!/usr/bin/env python3
# Experiment (issue 14, 2026-12-07; docs/calibration.md, "The dev-only extension"): what the
# extension's labels add to probe-v1, measured out of fold on the v2 dev items only. The same
# folds as the other probe experiments (topic-grouped 10 folds, seed 0; one language held out),
# built on the v2 dev items; the extension items (cal3-*) are never scored, and are added to
# the training folds or not - never those of the held-out fold's topics (topic-grouped) or
# language (language held out). Needs numpy and scikit-learn.
#
#   python3 scripts/experiments/probe_extension_cv.py JUDGE_SCORES.json
#
# JUDGE_SCORES.json: `cardinal calibrate --scorer probe-v1 --split dev` (the items' `probe`
# features, full-card framing).
import json, sys
import numpy as np
from probe_common import DIMS, load_labels, binof, binned, kappa_q, topic_folds, fit

labels = load_labels()
X = {s['item_id']: np.array(s['probe']) for s in json.load(open(sys.argv[1]))['items']
     if s['framing'] == 'full_card' and s.get('probe')}
v2 = sorted(i for i in X if labels[i][0]['split'] == 'dev' and not i.startswith('cal3-'))
ext = sorted(i for i in X if i.startswith('cal3-'))
print(f'{len(v2)} v2 dev items scored out of fold, {len(ext)} extension items for training')
lang = np.array([labels[i][0]['lang'] for i in v2]); ext_lang = np.array([labels[i][0]['lang'] for i in ext])
# Topic folds over v2 and the extension together (the same 42 topics, so the same map as the
# other experiments, asserted): an extension item whose topic is held out is not trained on.
folds = topic_folds(labels, v2 + ext); tg, tg_ext = folds[:len(v2)], folds[len(v2):]
assert (tg == topic_folds(labels, v2)).all(), 'the topic map differs from the other experiments'
Xv, Xe = np.array([X[i] for i in v2]), np.array([X[i] for i in ext])
for dim in DIMS:
    y = np.array([labels[i][1][dim] for i in v2]); yb = np.array([binof(s) for s in y])
    ye = np.array([labels[i][1][dim] for i in ext])
    print(f'{dim}: majority bin {(yb == np.bincount(yb).argmax()).mean():.3f}')
    for sname, groups, ext_ok in [('topic', tg, lambda g: tg_ext != g), ('lang', lang, lambda g: ext_lang != g)]:
        for with_ext in (False, True):
            pb = np.zeros(len(y), int)
            for g in np.unique(groups):
                te = groups == g; tr = ~te
                Xtr, ytr = Xv[tr], y[tr]
                if with_ext:
                    k = ext_ok(g); Xtr = np.vstack([Xtr, Xe[k]]); ytr = np.concatenate([ytr, ye[k]])
                pred, lo, hi = fit(Xtr, ytr)
                pb[te] = binned(pred(Xv[te]), lo, hi)
            per = {str(l): round(float((pb[lang == l] == yb[lang == l]).mean()), 3) for l in np.unique(lang)}
            print(f'  {sname:5s} {"with" if with_ext else "without":7s} extension: {(pb == yb).mean():.3f} kq {kappa_q(yb, pb):.2f} {per}')
