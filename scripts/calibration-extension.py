#!/usr/bin/env python3
"""The dev-only extension of the calibration corpus (ids `cal3-<lang>-NNN`, 2026-12-07): new
labelled items written after the v2 split was frozen, all in `dev`, so that whatever is fitted
reads more labels while the test split stays the one every reported variant was scored on.
The anchoring order of RUBRIC.md §8 holds for them (first labels, blind second labels,
adjudication, all committed before any judge score of these items exists).

    python3 scripts/calibration-extension.py blind DIR
        for each DIR/<lang>.first.jsonl (the writer's items with first labels), picks the items to
        second-label — half of each language, a seeded sample stratified by category x
        faithfulness bin — and writes DIR/<lang>.blind.jsonl with only id, lang, question,
        answer and cited (no label, category or severity).
    python3 scripts/calibration-extension.py disagreements DIR
        reads DIR/<lang>.second.jsonl ({"id", "second_labels"}) and writes
        DIR/<lang>.adjudicate.jsonl: the items whose bins differ, both labels in a seeded shuffled
        order (as A and B), for an adjudicator who does not know who wrote which.
    python3 scripts/calibration-extension.py blind-all DIR
        like `blind`, every item (a small addendum is second-labelled whole).
    python3 scripts/calibration-extension.py merge DIR
        appends the merged items (first labels, second labels, adjudications from
        DIR/<lang>.adjudicated.jsonl: {"id", "adjudicated": {dim: {"score", "note"}}}) to
        data/calibration/<lang>.jsonl. Refuses if any of the ids is already there.
"""
import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path

SEED = "cardinal-calibration-extension-1"
DIMS = ("groundedness", "faithfulness")
LANGS = ("en", "es-419", "pt-BR")


def bin_of(s):
    return "low" if s <= 2 else ("mid" if s == 3 else "high")


def h(*parts):
    return hashlib.sha256("|".join((SEED,) + parts).encode()).hexdigest()


def read(path):
    return [json.loads(l) for l in Path(path).read_text(encoding="utf-8").splitlines() if l.strip()]


def write(path, rows):
    with Path(path).open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def blind(d, share_all=False):
    for lang in LANGS:
        if not (d / f"{lang}.first.jsonl").exists() or (d / f"{lang}.blind.jsonl").exists():
            continue
        items = read(d / f"{lang}.first.jsonl")
        groups = defaultdict(list)
        for it in items:
            groups[(it["category"], bin_of(it["labels"]["faithfulness"]["score"]))].append(it)
        picked, start = [], 0
        for key in sorted(groups):
            g = sorted(groups[key], key=lambda it: h(it["id"]))
            picked += [it for i, it in enumerate(g) if share_all or (i + start) % 2 == 0]
            if len(g) % 2 == 1:
                start ^= 1
        picked.sort(key=lambda it: it["id"])
        write(d / f"{lang}.blind.jsonl", [{k: it[k] for k in ("id", "lang", "question", "answer", "cited")} for it in picked])
        print(f"{lang}: {len(picked)} of {len(items)} items to second-label")


def disagreements(d):
    for lang in LANGS:
        if not (d / f"{lang}.second.jsonl").exists() or (d / f"{lang}.adjudicate.jsonl").exists():
            continue
        first = {it["id"]: it for it in read(d / f"{lang}.first.jsonl")}
        out = []
        for s in read(d / f"{lang}.second.jsonl"):
            it = first[s["id"]]
            dims = [x for x in DIMS if bin_of(it["labels"][x]["score"]) != bin_of(s["second_labels"][x]["score"])]
            if not dims:
                continue
            a, b = it["labels"], s["second_labels"]
            if int(h(it["id"], "order"), 16) % 2:
                a, b = b, a
            out.append({"id": it["id"], "lang": lang, "question": it["question"], "answer": it["answer"],
                        "cited": it["cited"], "dimensions": dims,
                        "A": {x: a[x] for x in dims}, "B": {x: b[x] for x in dims}})
        write(d / f"{lang}.adjudicate.jsonl", out)
        print(f"{lang}: {len(out)} items to adjudicate")


def merge(d):
    for lang in LANGS:
        if not (d / f"{lang}.first.jsonl").exists():
            continue
        target = Path("data/calibration") / f"{lang}.jsonl"
        have = {it["id"] for it in read(target)}
        items = read(d / f"{lang}.first.jsonl")
        second_path = d / f"{lang}.second.jsonl"
        second = {s["id"]: s["second_labels"] for s in read(second_path)} if second_path.exists() else {}
        adj_path = d / f"{lang}.adjudicated.jsonl"
        adj = {a["id"]: a["adjudicated"] for a in read(adj_path)} if adj_path.exists() else {}
        clash = sorted(have & {it["id"] for it in items})
        if clash:
            sys.exit(f"{target}: already holds {clash[:3]}")
        rows = []
        for it in items:
            if it.get("split") != "dev" or not it["id"].startswith("cal3-"):
                sys.exit(f"{it['id']}: extension items are cal3-* and dev")
            if it["id"] in second:
                it["second_labels"] = second[it["id"]]
            if it["id"] in adj:
                it["adjudicated"] = adj[it["id"]]
            rows.append(it)
        with target.open("a", encoding="utf-8") as f:
            for it in rows:
                f.write(json.dumps(it, ensure_ascii=False) + "\n")
        print(f"{target}: {len(rows)} items appended ({sum(i['id'] in second for i in rows)} second-labelled, {len(adj)} adjudicated)")


if __name__ == "__main__":
    commands = {"blind": blind, "blind-all": lambda d: blind(d, True),
                "disagreements": disagreements, "merge": merge}
    if len(sys.argv) != 3 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    commands[sys.argv[1]](Path(sys.argv[2]))
