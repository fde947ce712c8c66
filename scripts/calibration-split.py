#!/usr/bin/env python3
"""Assign the frozen dev/test split of the calibration corpus (run once, before any judge score).

For each language file data/calibration/<lang>.jsonl, items are grouped by category x
faithfulness bin of the reference label (the adjudicated score when there is one, else the first
label), ordered inside each group by sha256(SEED | id), and dealt alternately to dev and test; the
side that starts alternates between groups of odd size, so each language ends about half and half.

Refuses to run when any item already carries a split: the split is frozen once assigned. The
corpus check (`cardinal data check`) verifies the stratification.
"""
import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path

SEED = "cardinal-calibration-split-v2"


def bin_of(s):
    return "low" if s <= 2 else ("mid" if s == 3 else "high")


def reference(item, dim):
    adj = (item.get("adjudicated") or {}).get(dim)
    return adj["score"] if adj else item["labels"][dim]["score"]


def main(data_dir):
    for path in sorted(Path(data_dir).glob("*.jsonl")):
        items = [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines() if l.strip()]
        if any("split" in it for it in items):
            sys.exit(f"{path}: items already carry a split; the split is frozen")
        groups = defaultdict(list)
        for it in items:
            groups[(it["category"], bin_of(reference(it, "faithfulness")))].append(it)
        start = 0
        for key in sorted(groups):
            g = sorted(groups[key], key=lambda it: hashlib.sha256(f"{SEED}|{it['id']}".encode()).hexdigest())
            for i, it in enumerate(g):
                it["split"] = "dev" if (i + start) % 2 == 0 else "test"
            if len(g) % 2 == 1:
                start ^= 1
        with path.open("w", encoding="utf-8") as f:
            for it in items:
                f.write(json.dumps(it, ensure_ascii=False) + "\n")
        dev = sum(it["split"] == "dev" for it in items)
        print(f"{path}: {dev} dev, {len(items) - dev} test")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "data/calibration")
