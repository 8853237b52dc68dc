#!/usr/bin/env python3
"""Validate controller.jsonl and extract.jsonl and print label statistics.

Usage: python3 check.py [DIR]   (DIR defaults to the folder of this script)
Exit status is 1 if any error is found.
"""
import datetime
import difflib
import json
import os
import re
import sys
from collections import Counter

MEM_TYPES = {"project_decision", "user_preference", "discussion_conclusion", "action_item",
             "constraint", "risk", "feedback", "insight", "issue", "learning", "pattern"}
EXT_TYPES = MEM_TYPES | {"fact"}
NEEDS = {"yes", "no", "maybe"}
MODES = {"catalog", "details"}
RANGES = {"last_7_days", "last_30_days", "all"}
LANGS = {"zh", "en"}
CJK = re.compile(r"[\u4e00-\u9fff]")

errors = []


def err(fname, n, msg):
    errors.append(f"{fname}:{n}: {msg}")


def load(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                err(os.path.basename(path), n, "blank line")
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                err(os.path.basename(path), n, f"invalid JSON: {e}")
                continue
            if not isinstance(obj, dict):
                err(os.path.basename(path), n, "line is not a JSON object")
                continue
            rows.append((n, obj))
    return rows


def check_lang(fname, n, obj):
    lang, text = obj.get("lang"), obj.get("text")
    if lang not in LANGS:
        err(fname, n, f"bad lang {lang!r}")
    if not isinstance(text, str) or not text.strip():
        err(fname, n, "text missing or empty")
        return
    has_cjk = bool(CJK.search(text))
    if lang == "zh" and not has_cjk:
        err(fname, n, "lang zh but text has no Chinese characters")
    if lang == "en" and has_cjk:
        err(fname, n, "lang en but text contains Chinese characters")


def parse_date(s):
    try:
        return datetime.date.fromisoformat(s)
    except (TypeError, ValueError):
        return None


def norm(t):
    return re.sub(r"[\s\W_]+", "", t.lower())


def near_duplicates(fname, rows, threshold=0.9):
    seen = {}
    items = []
    for n, obj in rows:
        t = obj.get("text")
        if not isinstance(t, str):
            continue
        k = norm(t)
        if k in seen:
            err(fname, n, f"duplicate of line {seen[k]}")
        seen.setdefault(k, n)
        items.append((n, k))
    pairs = []
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            a, b = items[i][1], items[j][1]
            if a == b or min(len(a), len(b)) < 8:
                continue
            if abs(len(a) - len(b)) / max(len(a), len(b)) > 0.2:
                continue
            r = difflib.SequenceMatcher(None, a, b).ratio()
            if r >= threshold:
                pairs.append((items[i][0], items[j][0], round(r, 2)))
    for a, b, r in pairs:
        err(fname, b, f"near-duplicate of line {a} (similarity {r})")


def pct(a, b):
    return f"{a} ({100.0 * a / b:.1f}%)" if b else str(a)


def check_controller(path):
    fname = os.path.basename(path)
    rows = load(path)
    by_lang, by_need, by_mode, by_type, by_range = Counter(), Counter(), Counter(), Counter(), Counter()
    by_lang_need = Counter()
    ctx_count = 0
    allowed = {"text", "lang", "need", "mode", "types", "time_range", "context"}
    for n, o in rows:
        for k in ("text", "lang", "need", "mode", "types"):
            if k not in o:
                err(fname, n, f"missing key {k}")
        extra = set(o) - allowed
        if extra:
            err(fname, n, f"unknown keys {sorted(extra)}")
        check_lang(fname, n, o)
        need, mode, types = o.get("need"), o.get("mode"), o.get("types")
        if need not in NEEDS:
            err(fname, n, f"bad need {need!r}")
        if mode not in MODES:
            err(fname, n, f"bad mode {mode!r}")
        if not isinstance(types, list) or any(t not in MEM_TYPES for t in types):
            err(fname, n, f"bad types {types!r}")
            types = []
        if len(set(types)) != len(types):
            err(fname, n, "repeated type")
        tr = o.get("time_range", "all")
        if isinstance(tr, str):
            if tr not in RANGES:
                err(fname, n, f"bad time_range {tr!r}")
            by_range[tr] += 1
        elif isinstance(tr, dict):
            s, e = parse_date(tr.get("start")), parse_date(tr.get("end"))
            if set(tr) != {"start", "end"} or not s or not e or s > e:
                err(fname, n, f"bad explicit time_range {tr!r}")
            elif e > datetime.date(2026, 11, 22):
                err(fname, n, "explicit range ends after 2026-11-22 (assumed today)")
            by_range["explicit"] += 1
        else:
            err(fname, n, f"bad time_range {tr!r}")
        if need == "no":
            if types:
                err(fname, n, "need=no must have empty types")
            if tr != "all":
                err(fname, n, "need=no must have time_range all")
        if "context" in o:
            ctx_count += 1
            c = o["context"]
            if not isinstance(c, dict) or set(c) - {"message_count", "recent_messages"}:
                err(fname, n, "bad context object")
            else:
                mc = c.get("message_count")
                rm = c.get("recent_messages", [])
                if not isinstance(mc, int) or mc < 0:
                    err(fname, n, "context.message_count must be an int >= 0")
                if not isinstance(rm, list) or len(rm) > 3 or any(not isinstance(x, str) for x in rm):
                    err(fname, n, "context.recent_messages must be a list of <= 3 strings")
                elif isinstance(mc, int) and len(rm) > mc:
                    err(fname, n, "more recent_messages than message_count")
        by_lang[o.get("lang")] += 1
        by_need[need] += 1
        by_lang_need[(o.get("lang"), need)] += 1
        by_mode[(need, mode)] += 1
        for t in types:
            by_type[t] += 1
    near_duplicates(fname, rows)
    total = len(rows)
    print(f"== {fname}: {total} lines")
    print("  per language:", ", ".join(f"{k}={pct(v, total)}" for k, v in sorted(by_lang.items())))
    print("  per need:    ", ", ".join(f"{k}={pct(v, total)}" for k, v in sorted(by_need.items())))
    print("  need x lang: ", ", ".join(f"{l}/{nd}={v}" for (l, nd), v in sorted(by_lang_need.items())))
    print("  need x mode: ", ", ".join(f"{nd}/{m}={v}" for (nd, m), v in sorted(by_mode.items())))
    print("  time_range:  ", ", ".join(f"{k}={v}" for k, v in sorted(by_range.items())))
    print("  with context:", pct(ctx_count, total))
    print("  target types (count of lines listing each):")
    for t, v in by_type.most_common():
        print(f"    {t:24s}{v}")
    if total < 340:
        err(fname, 0, f"only {total} lines, need >= 340")
    return total


def check_extract(path):
    fname = os.path.basename(path)
    rows = load(path)
    by_lang, by_type, n_items = Counter(), Counter(), Counter()
    noise = Counter()
    corrections = 0
    allowed = {"text", "lang", "context", "expected"}
    for n, o in rows:
        for k in ("text", "lang", "expected"):
            if k not in o:
                err(fname, n, f"missing key {k}")
        extra = set(o) - allowed
        if extra:
            err(fname, n, f"unknown keys {sorted(extra)}")
        check_lang(fname, n, o)
        lang = o.get("lang")
        by_lang[lang] += 1
        if "context" in o:
            c = o["context"]
            if not isinstance(c, list) or not c or any(not isinstance(x, str) for x in c):
                err(fname, n, "context must be a non-empty list of strings")
            corrections += 1
        exp = o.get("expected")
        if not isinstance(exp, list):
            err(fname, n, "expected must be a list")
            continue
        n_items[len(exp)] += 1
        if not exp:
            noise[lang] += 1
        text = (o.get("text") or "").lower()
        seen = set()
        for it in exp:
            if not isinstance(it, dict) or set(it) != {"type", "keywords"}:
                err(fname, n, f"bad expected item {it!r}")
                continue
            t, kws = it["type"], it["keywords"]
            if t not in EXT_TYPES:
                err(fname, n, f"bad type {t!r}")
            if not isinstance(kws, list) or not 1 <= len(kws) <= 2:
                err(fname, n, f"keywords must be a list of 1-2 strings: {kws!r}")
                continue
            for kw in kws:
                if not isinstance(kw, str) or not kw.strip():
                    err(fname, n, f"empty keyword in {kws!r}")
                elif kw.lower() not in text:
                    err(fname, n, f"keyword {kw!r} not found verbatim in text")
            key = (t, tuple(k.lower() for k in kws))
            if key in seen:
                err(fname, n, f"repeated expected item {key}")
            seen.add(key)
            by_type[t] += 1
    near_duplicates(fname, rows)
    total = len(rows)
    n_noise = sum(noise.values())
    print(f"== {fname}: {total} lines")
    print("  per language:", ", ".join(f"{k}={pct(v, total)}" for k, v in sorted(by_lang.items())))
    print("  noise (expected == []):", pct(n_noise, total),
          "| per language:", ", ".join(f"{k}={pct(v, by_lang[k])}" for k, v in sorted(noise.items())))
    print("  expected items per line:", ", ".join(f"{k} items={v}" for k, v in sorted(n_items.items())))
    print("  lines with context (corrections/follow-ups):", corrections)
    print("  expected items per type:")
    for t, v in by_type.most_common():
        print(f"    {t:24s}{v}")
    if total < 240:
        err(fname, 0, f"only {total} lines, need >= 240")
    if total and n_noise / total < 0.35:
        err(fname, 0, f"noise share {n_noise / total:.2f} < 0.35")
    return total


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    check_controller(os.path.join(d, "controller.jsonl"))
    print()
    check_extract(os.path.join(d, "extract.jsonl"))
    print()
    if errors:
        print(f"{len(errors)} error(s):")
        for e in errors:
            print("  " + e)
        sys.exit(1)
    print("OK: no errors")


if __name__ == "__main__":
    main()
