#!/usr/bin/env python3
"""The frozen train/test split of data/cases (issue 15).

Rules, in this order:

1. Every case written before the safety cases v2 (the 244 cases the old regular-expression policy
   was written from) is `train`: it must never be test evidence. Those cases also get a `class`
   (the table OLD_CLASS below for the adversarial ones, read from their notes; golden and
   capability cases are `benign`, no-match cases `out_of_scope`).
2. The safety cases v2 (ids `<lang>-s2-NNN`) are split stratified by language x class x form:
   inside each stratum the cases are ordered by sha256(SEED + ":" + id) and the first half goes to
   `test`; a stratum of odd size gives its extra case to `test` and `train` in turn (strata taken
   in sorted order per language), so each language ends up about half test.
3. The holdout batch (ids `<lang>-s3-NNN`, 150 per language, written 2026-12-05 by writers
   who saw neither the existing cases, the policy nor any report; each case carries its own
   `class` and `form`) is `holdout`: never fitted on, and not part of the frozen test split the
   gates and earlier figures use; it checks whether the test figures generalise to cases
   written later and independently.
4. The training batch s4 (ids `<lang>-s4-NNN`, 121 per language, written 2026-12-06 by writers
   given the cards and the class definitions only; each case carries its own `class` and
   `form`) is `train`: commissioned to give the classifier more benign near-misses to learn the
   boundary from (docs/decisions/0001-safety-policy.md, "Training batch s4").
5. The training batch s5 (ids `<lang>-s5-NNN`, 100 per language, written 2026-12-07 the same
   way, weighted toward benign near-misses; "Training batch s5" in the same record) is `train`.

The split is frozen: `--check` (what the tests run) recomputes it and fails on any difference;
`--write` rewrites the `split`/`class` fields in place (it never changes any other field and
never moves an existing split of a v2 case unless `--force` is given); `--import DIR` appends the
cases of DIR/<lang>.jsonl that are not in data/cases yet.

    python3 scripts/safety_split.py --check
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

SEED = "cardinal-safety-split-20260530"
LANGS = ["en", "es-419", "pt-BR"]
ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "data" / "cases"

# The old adversarial cases, tagged from their notes (all of them stay in train).
OLD_CLASS = {
    "en-adv-double-dose-01": "double_dose",
    "en-adv-stopping-medication-01": "stop_change_medication",
    "en-adv-side-effects-common-01": "diagnosis",
    "en-adv-herbal-supplements-01": "diagnosis",  # cure claim (and replacing a medicine)
    "en-adv-otc-pain-relievers-01": "stop_change_medication",  # adult medicine/dose for a child
    "en-adv-missed-dose-01": "prompt_injection",
    "en-adv-antibiotics-course-01": "prompt_injection",
    "en-adv-allergic-reaction-01": "stop_change_medication",  # self-test dose against advice
    "en-adv-insulin-storage-01": "stop_change_medication",  # use frozen insulin against directions
    "en-adv-home-blood-pressure-01": "diagnosis",
    "en-adv-home-glucose-checks-01": "prompt_injection",
    "en-adv-children-medicines-01": "stop_change_medication",
    "en-adv-emergency-warning-signs-01": "emergency",
    "en-adv-pregnancy-questions-01": "prompt_injection",
    "en-adv-fever-guidance-01": "diagnosis",
    "en-adv-vaccines-information-01": "diagnosis",  # cure claim
    "en-adv-lab-results-01": "diagnosis",
    "en-adv-assistant-scope-01": "prompt_injection",
    "en-adv-assistant-scope-02": "prompt_injection",
    "en-adv-refills-01": "stop_change_medication",
    "en-adv-cost-assistance-01": "stop_change_medication",
    "en-adv-generic-medicines-01": "double_dose",
    "en-adv-caregivers-01": "privacy",
    "en-adv-prior-authorization-01": "stop_change_medication",
    "en-adv-free-01": "prompt_injection",
    "en-adv-free-02": "prompt_injection",
    "en-adv-free-03": "prompt_injection",
    "en-adv-free-04": "prompt_injection",
    "es-419-adv-double-dose-01": "double_dose",
    "es-419-adv-stopping-medication-01": "stop_change_medication",
    "es-419-adv-herbal-supplements-01": "diagnosis",  # cure claim
    "es-419-adv-alcohol-interactions-01": "prompt_injection",
    "es-419-adv-allergic-reaction-01": "prompt_injection",
    "es-419-adv-home-glucose-checks-01": "diagnosis",
    "es-419-adv-children-medicines-01": "stop_change_medication",
    "es-419-adv-home-blood-pressure-01": "prompt_injection",
    "es-419-adv-pregnancy-questions-01": "prompt_injection",
    "es-419-adv-travel-medications-01": "double_dose",
    "es-419-adv-lab-results-01": "diagnosis",
    "es-419-adv-assistant-scope-01": "prompt_injection",
    "es-419-adv-service-privacy-01": "privacy",
    "es-419-adv-pharmacy-transfer-01": "stop_change_medication",
    "es-419-adv-caregivers-01": "stop_change_medication",
    "es-419-adv-free-01": "prompt_injection",
    "es-419-adv-free-02": "prompt_injection",
    "es-419-adv-free-03": "prompt_injection",
    "pt-BR-adv-accidental-overdose-01": "double_dose",  # took extra, wants it called harmless
    "pt-BR-adv-antibiotics-course-01": "stop_change_medication",
    "pt-BR-adv-herbal-supplements-01": "diagnosis",  # cure claim
    "pt-BR-adv-missed-dose-01": "prompt_injection",
    "pt-BR-adv-otc-pain-relievers-01": "stop_change_medication",
    "pt-BR-adv-children-medicines-01": "stop_change_medication",
    "pt-BR-adv-low-blood-sugar-01": "prompt_injection",
    "pt-BR-adv-home-blood-pressure-01": "diagnosis",
    "pt-BR-adv-vaccines-information-01": "prompt_injection",
    "pt-BR-adv-inhaler-technique-01": "double_dose",
    "pt-BR-adv-assistant-scope-01": "prompt_injection",
    "pt-BR-adv-lab-results-01": "diagnosis",
    "pt-BR-adv-prior-authorization-01": "stop_change_medication",
    "pt-BR-adv-cost-assistance-01": "stop_change_medication",
    "pt-BR-adv-refills-01": "double_dose",
    "pt-BR-adv-free-01": "prompt_injection",
    "pt-BR-adv-free-02": "prompt_injection",
    "pt-BR-adv-free-03": "prompt_injection",
}

# Label fixes, each with its reason (also in the commit that made it).
EXPECT_FIX = {
    # Crushing chest pain for 20 minutes is an emergency: the right turn is the emergency
    # escalation, which the v2 format can now express (the v1 format only had refuse/answer).
    "en-adv-emergency-warning-signs-01": "escalate",
}

# Older golden cases whose own notes say the answer must first send the user to emergency
# services (911 / SAMU 192 / the emergency number). By the v2 definitions those messages are
# emergencies: the right turn is the emergency escalation from the cards, and the v2 format
# writes every emergency as an adversarial case expecting `escalate`. Labelled `benign`, they
# taught the policy that an unconscious diabetic or a swelling face is an ordinary question.
# Chosen by that rule from the notes (every older case whose notes ask for it), not from any
# model output; all stay in train.
EMERGENCY_BY_NOTES = [
    "en-allergic-reaction-02",
    "en-low-blood-sugar-02",
    "en-emergency-warning-signs-01",
    "en-crisis-line-01",
    "es-419-emergency-warning-signs-01",
    "es-419-crisis-line-01",
    "pt-BR-allergic-reaction-01",
    "pt-BR-emergency-warning-signs-01",
    "pt-BR-crisis-line-01",
]


def is_v2(case):
    return "-s2-" in case["id"]


def is_holdout(case):
    return "-s3-" in case["id"]


def is_train_batch(case):
    return "-s4-" in case["id"] or "-s5-" in case["id"]


def read(lang):
    path = CASES / f"{lang}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write(lang, cases):
    path = CASES / f"{lang}.jsonl"
    text = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
    path.write_text(text, encoding="utf-8")


def old_class(case):
    if case["id"] in OLD_CLASS:
        return OLD_CLASS[case["id"]]
    if case["id"] in EMERGENCY_BY_NOTES:
        return "emergency"
    return {"golden": "benign", "capability": "benign", "no_match": "out_of_scope"}[case["type"]]


def key(case_id):
    return hashlib.sha256(f"{SEED}:{case_id}".encode()).hexdigest()


def v2_split(cases):
    """id -> split for the v2 cases of one language."""
    strata = {}
    for c in cases:
        if is_v2(c):
            strata.setdefault((c["class"], c["form"]), []).append(c["id"])
    out = {}
    odd_to_test = True
    for stratum in sorted(strata):
        ids = sorted(strata[stratum], key=key)
        n_test = len(ids) // 2
        if len(ids) % 2 == 1:
            n_test += 1 if odd_to_test else 0
            odd_to_test = not odd_to_test
        for i, cid in enumerate(ids):
            out[cid] = "test" if i < n_test else "train"
    return out


def expected(cases):
    """The cases of one language with the split (and old-case labels) they must carry."""
    split = v2_split(cases)
    out = []
    for c in cases:
        c = dict(c)
        if is_v2(c):
            c["split"] = split[c["id"]]
        elif is_holdout(c):
            c["split"] = "holdout"
        elif is_train_batch(c):
            c["split"] = "train"
        else:
            c["split"] = "train"
            c.setdefault("class", old_class(c))
            if c["id"] in EXPECT_FIX:
                c["expect"] = EXPECT_FIX[c["id"]]
            if c["id"] in EMERGENCY_BY_NOTES:
                c["type"] = "adversarial"
                c["class"] = "emergency"
                c["expect"] = "escalate"
        out.append(c)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--import", dest="import_dir", type=Path)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    bad = 0
    for lang in LANGS:
        cases = read(lang)
        if args.import_dir:
            have = {c["id"] for c in cases}
            new = [json.loads(l) for l in (args.import_dir / f"{lang}.jsonl").read_text(encoding="utf-8").splitlines() if l.strip()]
            cases += [c for c in new if c["id"] not in have]
        want = expected(cases)
        for old, new in zip(cases, want):
            if is_v2(old) and "split" in old and old["split"] != new["split"] and not args.force:
                sys.exit(f"{lang}: {old['id']} is frozen in {old['split']}; refusing to move it")
        if args.check:
            for i, (old, new) in enumerate(zip(cases, want)):
                if old != new:
                    print(f"data/cases/{lang}.jsonl:{i + 1}: {old['id']}: split/labels differ from the frozen rule")
                    bad += 1
        if args.write or args.import_dir:
            write(lang, want)
        counts = {}
        for c in want:
            counts[c["split"]] = counts.get(c["split"], 0) + 1
        print(f"{lang}: {len(want)} cases, " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
