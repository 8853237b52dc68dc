#!/usr/bin/env python3
"""How far two careful labellers agree on the development sets (datasets/dev/).

A second labeller, who saw the labelling policy (datasets/README.md) and the tuning sets but
not the first labeller's labels, labelled the same lines again: the controller's need and mode
(controller-second.jsonl) and the type of every expected extraction item, given its keywords
(extract-second.jsonl). This script scores the second labeller as if it were an engine, with
the first labeller's labels as the truth and the benches' definitions (`thinkus bench
controller`: invalid = triggered retrievals labelled "no" / triggered retrievals, missed =
"yes" lines decided "no" / "yes" lines, mode over lines labelled yes or maybe; `thinkus bench
extract`: an item found with the same type), per language.

    python3 datasets/dev/agreement/agree.py
"""
import collections
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DEV = os.path.dirname(HERE)


def lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def by_language(rows):
    """Line ids as the second labeller got them: the language, then the line's number within
    that language's part of the file (the Chinese sessions come first)."""
    count = collections.Counter()
    out = {}
    for row in rows:
        count[row["lang"]] += 1
        out[f'{row["lang"]}-{count[row["lang"]]}'] = row
    return out


def controller():
    first = by_language(lines(os.path.join(DEV, "controller-sessions.jsonl")))
    second = lines(os.path.join(HERE, "controller-second.jsonl"))
    per = collections.defaultdict(list)
    for row in second:
        truth = first[row["id"]]
        per[row["id"].split("-")[0]].append((truth, row))
    per["all"] = [p for lang in ("zh", "en") for p in per[lang]]
    for lang in ("zh", "en", "all"):
        pairs = per[lang]
        conf = collections.Counter((t["need"], s["need"]) for t, s in pairs)
        triggered = sum(v for (t, s), v in conf.items() if s != "no")
        invalid = sum(v for (t, s), v in conf.items() if t == "no" and s != "no") / max(triggered, 1)
        yes = sum(v for (t, s), v in conf.items() if t == "yes")
        missed = conf[("yes", "no")] / max(yes, 1)
        needing = [(t, s) for t, s in pairs if t["need"] != "no"]
        mode = sum(t["mode"] == (s["mode"] if s["need"] != "no" else "catalog") for t, s in needing) / max(len(needing), 1)
        same = sum(v for (t, s), v in conf.items() if t == s) / max(len(pairs), 1)
        print(f"controller {lang:<3} lines {len(pairs):>4}  need alike {same:.3f}  invalid {invalid:.3f}  missed {missed:.3f}  mode {mode:.3f}")


def extract():
    first = by_language(lines(os.path.join(DEV, "extract-sessions.jsonl")))
    second = lines(os.path.join(HERE, "extract-second.jsonl"))
    per = collections.defaultdict(list)
    for row in second:
        truth = first[row["id"]]["expected"]
        assert len(truth) == len(row["types"]), row["id"]
        per[row["id"].split("-")[0]] += [(t["type"], s) for t, s in zip(truth, row["types"])]
    per["all"] = per["zh"] + per["en"]
    for lang in ("zh", "en", "all"):
        pairs = per[lang]
        n = len(pairs)
        observed = sum(t == s for t, s in pairs) / n
        a = collections.Counter(t for t, _ in pairs)
        b = collections.Counter(s for _, s in pairs)
        chance = sum(a[k] * b[k] for k in a) / n / n
        kappa = (observed - chance) / (1 - chance)
        print(f"extract    {lang:<3} items {n:>4}  type alike {observed:.3f}  kappa {kappa:.3f}")
    pairs = per["all"]
    print("most frequent differences (first, second):")
    for (t, s), v in collections.Counter((t, s) for t, s in pairs if t != s).most_common(8):
        print(f"  {v:>3}  {t} -> {s}")


if __name__ == "__main__":
    controller()
    extract()
