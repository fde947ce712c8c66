"""Shared pieces of the judge-probe experiments (issue 14; docs/calibration.md, "Tried after
probe-v1"): the calibration labels, the frozen bins, the cut-point search probe-v1 uses, the
quadratic-weighted kappa and the topic-grouped folds. Needs numpy."""
import glob
import json

import numpy as np

DIMS = ['groundedness', 'faithfulness']


def load_labels():
    """item id -> (item, {dimension: reference 1-5 score}); the adjudicated score when present."""
    labels = {}
    for f in glob.glob('data/calibration/*.jsonl'):
        for line in open(f):
            it = json.loads(line); ref = {}
            for d in DIMS:
                a = (it.get('adjudicated') or {}).get(d)
                ref[d] = a['score'] if a else it['labels'][d]['score']
            labels[it['id']] = (it, ref)
    return labels


def binof(s):
    """The frozen bins: 1-2 low, 3 mid, 4-5 high."""
    return 0 if s <= 2 else (1 if s == 3 else 2)


def cuts_fit(p, y):
    """The two cut points on predictions p that maximise binned agreement with scores y."""
    yb = np.array([binof(v) for v in y]); c = np.unique(np.concatenate([p, [p.min() - 1, p.max() + 1]])); best = (-1, 0, 0)
    mids = (c[:-1] + c[1:]) / 2
    for a in range(len(mids)):
        for b in range(a, len(mids)):
            jb = np.where(p < mids[a], 0, np.where(p < mids[b], 1, 2)); h = (jb == yb).sum()
            if h > best[0]: best = (h, mids[a], mids[b])
    return best[1], best[2]


def binned(p, lo, hi):
    return np.where(p < lo, 0, np.where(p < hi, 1, 2))


def kappa_q(a, b):
    """Quadratic-weighted kappa of two 0/1/2 bin arrays."""
    O = np.zeros((3, 3))
    for x, y in zip(a, b): O[x, y] += 1
    W = np.array([[(i - j) ** 2 / 4 for j in range(3)] for i in range(3)])
    E = np.outer(O.sum(1), O.sum(0)) / O.sum()
    return 1 - (W * O).sum() / (W * E).sum()


def probe_vector(pieces):
    """probe-v1's vector from a per-sentence reading (probe_rule_pmi's `pieces`): the
    token-weighted mean of the sentences' block-14 means; and the weights."""
    w = np.array([p['tokens'] for p in pieces], float)
    return (np.array([p['mean'] for p in pieces], float) * w[:, None]).sum(0) / w.sum(), w


def topic_folds(labels, ids, n=10, seed=0):
    """Topic-grouped fold of each item (no cited card's topic on both sides), seeded."""
    topic = np.array([labels[i][0]['cited'][0].rsplit('.', 1)[0] if labels[i][0]['cited'] else 'none' for i in ids])
    rng = np.random.RandomState(seed)
    topics = np.unique(topic); perm = rng.permutation(len(topics)); tfold = {t: perm[k] % n for k, t in enumerate(topics)}
    return np.array([tfold[t] for t in topic])


def bootstrap_ci(x):
    """Seeded bootstrap 95 % interval of the mean of x (2,000 resamples, seed 7)."""
    rng = np.random.RandomState(7)
    boot = [x[rng.randint(0, len(x), len(x))].mean() for _ in range(2000)]
    return np.percentile(boot, 2.5), np.percentile(boot, 97.5)


def print_test_figures(name, yt, pb, lang, dev_bins):
    """One variant's test figures: binned agreement with a seeded bootstrap 95 % CI, kappa,
    per-language agreement, the confusion matrix and the dev majority bin's agreement."""
    hits = (pb == yt).astype(float); lo, hi = bootstrap_ci(hits)
    per = {str(l): round(float(hits[lang == l].mean()), 3) for l in np.unique(lang)}
    print(f'{name}: {hits.mean():.3f} [{lo:.3f}, {hi:.3f}] kq {kappa_q(yt, pb):.2f} {per}')
    cm = np.zeros((3, 3), int)
    for a, b in zip(yt, pb): cm[a, b] += 1
    print('  confusion (rows human low/mid/high, columns judge):', cm.tolist())
    maj = np.bincount(dev_bins).argmax()
    print(f'  majority bin (dev) on test: {(yt == maj).mean():.3f}')


def model():
    """probe-v1's pipeline: standardise, PCA 32 (exact solver), ridge alpha 10."""
    from sklearn.preprocessing import StandardScaler
    from sklearn.decomposition import PCA
    from sklearn.linear_model import Ridge
    return StandardScaler(), PCA(32, svd_solver='full'), Ridge(alpha=10)


def fit(X, y):
    """Fit the pipeline on (X, y 1-5 scores) and its cut points on its own predictions."""
    s, p, r = model()
    Z = p.fit_transform(s.fit_transform(X)); r.fit(Z, y)
    pred = lambda A: r.predict(p.transform(s.transform(A)))
    lo, hi = cuts_fit(pred(X), y)
    return pred, lo, hi


def cv(X, Xc, has_c, y, groups):
    """Out-of-fold bins over the folds `groups`, for X and, where has_c, for the control
    features Xc (-1 elsewhere)."""
    pb = np.zeros(len(y), int); pc = np.full(len(y), -1)
    for g in np.unique(groups):
        te = groups == g; tr = ~te
        pred, lo, hi = fit(X[tr], y[tr])
        pb[te] = binned(pred(X[te]), lo, hi)
        tc = te & has_c
        if tc.any(): pc[tc] = binned(pred(Xc[tc]), lo, hi)
    return pb, pc


def score_variant(name, X, Xc, has_c, ids, labels, lang, rv, tg, cv_fn=cv):
    """One variant's out-of-fold agreement per gated dimension and fold scheme (topic-grouped
    folds `tg`, one language held out), printed with kappa, per-language agreement and the
    control on the rule-violation items `rv`; returns {(dim, scheme): (agreement, control
    difference)}."""
    res = {}
    for dim in DIMS:
        y = np.array([labels[i][1][dim] for i in ids]); yb = np.array([binof(s) for s in y])
        for sname, groups in [('topic', tg), ('lang', lang)]:
            pb, pc = cv_fn(X, Xc, has_c, y, groups)
            a = (pb == yb).mean(); per = {str(l): round(float((pb[lang == l] == yb[lang == l]).mean()), 3) for l in np.unique(lang)}
            cf, ch = (pb[rv] == yb[rv]).mean(), (pc[rv] == yb[rv]).mean()
            res[(dim, sname)] = (a, cf - ch)
            print(f'{name:4s} {dim:13s} {sname:5s} {a:.3f} kq {kappa_q(yb, pb):.2f} {per}  control {cf:.3f} / {ch:.3f} ({cf - ch:+.3f})')
    return res


class ProbePlus:
    """probe-v1's pipeline with extra features E appended after the PCA (standardised, same
    ridge); with use_probe False, the ridge on E alone."""

    def __init__(self, use_probe=True):
        self.use_probe = use_probe

    def fit(self, X, E, y):
        from sklearn.preprocessing import StandardScaler
        from sklearn.decomposition import PCA
        from sklearn.linear_model import Ridge
        parts = []
        if self.use_probe:
            self.sx = StandardScaler().fit(X); self.pca = PCA(32, svd_solver='full').fit(self.sx.transform(X))
            parts.append(self.pca.transform(self.sx.transform(X)))
        if E.shape[1]:
            self.se = StandardScaler().fit(E); parts.append(self.se.transform(E))
        self.r = Ridge(alpha=10).fit(np.hstack(parts), y)
        return self

    def predict(self, X, E):
        parts = []
        if self.use_probe:
            parts.append(self.pca.transform(self.sx.transform(X)))
        if E.shape[1]:
            parts.append(self.se.transform(E))
        return self.r.predict(np.hstack(parts))
