#!/usr/bin/env python3
"""Validate the Chinese retrieval sets and print their counts and sha256.

Usage: python3 check_retrieval.py [DIR]   (DIR defaults to the folder of this script)

Checks, for zh-dev.json, zh-heldout.json and en-heldout-parallel.json (LoCoMo format):
  * a JSON list of samples with sample_id (unique), conversation, qa and the three
    summary objects (observation, session_summary, event_summary);
  * two distinct speakers; every turn is spoken by one of them;
  * session_1..session_N contiguous, each with a date_time like "1:56 pm on 8 May, 2023"
    that parses, and the sessions in strictly increasing time;
  * dia_id of turn i in session N is "D<N>:<i>" (so all ids are unique);
  * every qa has a non-empty question and answer, category 1-4 and a non-empty evidence
    list of distinct ids that exist in the conversation; no question repeats in a sample;
  * the size rules of the brief: 8-12 sessions, 15-30 turns per session, >= 50 questions;
  * language: every Chinese turn and question contains CJK characters, and the English
    file contains none;
  * en-heldout-parallel.json mirrors zh-heldout.json: same sessions, dates, dia_ids,
    speaker order, number of questions, evidence and category question by question.

It prints per-file and per-conversation counts (sessions, turns, questions by category)
plus, for information, how many of a question's character bigrams (Chinese) or words
(English) occur in its evidence turns. Exit status 1 on any error.
"""
import datetime
import hashlib
import json
import os
import re
import sys
from collections import Counter

FILES = ["zh-dev.json", "zh-heldout.json", "en-heldout-parallel.json"]
PARALLEL = ("zh-heldout.json", "en-heldout-parallel.json")
CATS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
DATE_RE = re.compile(r"^(\d{1,2}):(\d{2}) (am|pm) on (\d{1,2}) (" + "|".join(MONTHS)
                     + r"), (\d{4})$")
CJK = re.compile(r"[\u4e00-\u9fff]")
SUMMARY_KEYS = ("observation", "session_summary", "event_summary")

errors = []


def err(where, msg):
    errors.append(f"{where}: {msg}")


def parse_date(text):
    """Return a datetime for a LoCoMo session date, or None."""
    m = DATE_RE.match(text)
    if not m:
        return None
    hour, minute, ampm, day, month, year = m.groups()
    hour, minute = int(hour), int(minute)
    if not 1 <= hour <= 12 or minute > 59:
        return None
    hour = hour % 12 + (12 if ampm == "pm" else 0)
    try:
        return datetime.datetime(int(year), MONTHS.index(month) + 1, int(day), hour, minute)
    except ValueError:
        return None


def sessions_of(conv):
    """The session numbers 1..N that have a turn list."""
    nums = sorted(int(k.split("_")[1]) for k in conv
                  if re.fullmatch(r"session_\d+", k))
    return nums


def check_sample(fname, s, is_zh):
    sid = s.get("sample_id", "?")
    where = f"{fname}:{sid}"
    for key in ("sample_id", "conversation", "qa") + SUMMARY_KEYS:
        if key not in s:
            err(where, f"missing key {key}")
    for key in SUMMARY_KEYS:
        if key in s and not isinstance(s[key], dict):
            err(where, f"{key} is not an object")
    conv = s.get("conversation", {})
    a, b = conv.get("speaker_a"), conv.get("speaker_b")
    if not a or not b or a == b:
        err(where, "speaker_a and speaker_b must be two distinct names")
    nums = sessions_of(conv)
    if nums != list(range(1, len(nums) + 1)):
        err(where, f"sessions not contiguous from 1: {nums}")
    if not 8 <= len(nums) <= 12:
        err(where, f"{len(nums)} sessions (want 8-12)")
    for k in conv:
        m = re.fullmatch(r"session_(\d+)_date_time", k)
        if m and int(m.group(1)) not in nums:
            err(where, f"{k} has no session")
    ids = {}
    turns = 0
    prev = None
    spoke = Counter()
    for n in nums:
        dt_text = conv.get(f"session_{n}_date_time")
        dt = parse_date(dt_text) if isinstance(dt_text, str) else None
        if dt is None:
            err(where, f"session_{n}_date_time does not parse: {dt_text!r}")
        elif prev is not None and dt <= prev:
            err(where, f"session_{n} is not later than the session before it")
        prev = dt or prev
        sess = conv[f"session_{n}"]
        if not 15 <= len(sess) <= 30:
            err(where, f"session_{n} has {len(sess)} turns (want 15-30)")
        for i, t in enumerate(sess, 1):
            tw = f"{where}:D{n}:{i}"
            if set(t) - {"speaker", "dia_id", "text"}:
                err(tw, f"unexpected keys {sorted(set(t) - {'speaker', 'dia_id', 'text'})}")
            if t.get("dia_id") != f"D{n}:{i}":
                err(tw, f"dia_id is {t.get('dia_id')!r}")
            if t.get("dia_id") in ids:
                err(tw, "duplicate dia_id")
            if t.get("speaker") not in (a, b):
                err(tw, f"unknown speaker {t.get('speaker')!r}")
            spoke[t.get("speaker")] += 1
            text = t.get("text")
            if not isinstance(text, str) or not text.strip():
                err(tw, "empty text")
                text = ""
            if is_zh and not CJK.search(text):
                err(tw, "Chinese turn without CJK characters")
            if not is_zh and CJK.search(text):
                err(tw, "CJK characters in an English turn")
            ids[t.get("dia_id")] = text
            turns += 1
    for sp in (a, b):
        if sp and not spoke[sp]:
            err(where, f"{sp} never speaks")
    qa = s.get("qa", [])
    if len(qa) < 50:
        err(where, f"{len(qa)} questions (want >= 50)")
    seen_q = set()
    cats = Counter()
    overlap = []
    for j, q in enumerate(qa, 1):
        qw = f"{where}:qa{j}"
        if set(q) - {"question", "answer", "evidence", "category"}:
            err(qw, "unexpected keys")
        question, answer = q.get("question"), q.get("answer")
        for name, val in (("question", question), ("answer", answer)):
            if not isinstance(val, str) or not val.strip():
                err(qw, f"empty {name}")
        question = question if isinstance(question, str) else ""
        if question in seen_q:
            err(qw, "question repeated")
        seen_q.add(question)
        if is_zh and not CJK.search(question):
            err(qw, "Chinese question without CJK characters")
        if not is_zh and (CJK.search(question) or CJK.search(str(answer))):
            err(qw, "CJK characters in an English question or answer")
        cat = q.get("category")
        if cat not in CATS:
            err(qw, f"category {cat!r} not in 1-4")
        cats[cat] += 1
        ev = q.get("evidence")
        if not isinstance(ev, list) or not ev:
            err(qw, "evidence must be a non-empty list")
            continue
        if len(set(ev)) != len(ev):
            err(qw, "repeated evidence id")
        for e in ev:
            if e not in ids:
                err(qw, f"evidence {e!r} matches no turn")
        if cat == 1 and len(set(ev)) < 2:
            err(qw, "multi-hop question with a single evidence turn")
        overlap.append(lexical_overlap(question, [ids.get(e, "") for e in ev], is_zh))
    return {"sessions": len(nums), "turns": turns, "qa": len(qa), "cats": cats,
            "overlap": overlap, "ids": ids}


def units(text, is_zh):
    if is_zh:
        chars = [c for c in text if CJK.match(c) or c.isalnum()]
        return {chars[i] + chars[i + 1] for i in range(len(chars) - 1)}
    return {w for w in re.findall(r"[a-z0-9']+", text.lower()) if len(w) > 3}


def lexical_overlap(question, texts, is_zh):
    q = units(question, is_zh)
    if not q:
        return 0.0
    ev = set().union(*(units(t, is_zh) for t in texts))
    return len(q & ev) / len(q)


def check_parallel(zh, en):
    if len(zh) != len(en):
        err("parallel", f"{len(zh)} Chinese samples but {len(en)} English ones")
    for sz, se in zip(zh, en):
        where = f"parallel:{sz.get('sample_id')}/{se.get('sample_id')}"
        cz, ce = sz.get("conversation", {}), se.get("conversation", {})
        if sessions_of(cz) != sessions_of(ce):
            err(where, "different sessions")
            continue
        for n in sessions_of(cz):
            if cz.get(f"session_{n}_date_time") != ce.get(f"session_{n}_date_time"):
                err(where, f"session_{n} dates differ")
            tz, te = cz[f"session_{n}"], ce[f"session_{n}"]
            if [t.get("dia_id") for t in tz] != [t.get("dia_id") for t in te]:
                err(where, f"session_{n} dia_ids differ")
            role_z = [t.get("speaker") == cz.get("speaker_a") for t in tz]
            role_e = [t.get("speaker") == ce.get("speaker_a") for t in te]
            if role_z != role_e:
                err(where, f"session_{n} speaker order differs")
        qz, qe = sz.get("qa", []), se.get("qa", [])
        if len(qz) != len(qe):
            err(where, f"{len(qz)} Chinese questions but {len(qe)} English ones")
        for j, (a, b) in enumerate(zip(qz, qe), 1):
            if a.get("evidence") != b.get("evidence") or a.get("category") != b.get("category"):
                err(where, f"qa{j}: evidence or category differs")


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    data = {}
    all_ids = set()
    print(f"{'file / sample':<34}{'conv':>5}{'sess':>6}{'turns':>7}{'qa':>5}"
          f"{'c1':>5}{'c2':>5}{'c3':>5}{'c4':>5}{'ovl':>6}")
    grand = Counter()
    for fname in FILES:
        path = os.path.join(folder, fname)
        try:
            with open(path, encoding="utf-8") as f:
                samples = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            err(fname, f"cannot load: {e}")
            continue
        if not isinstance(samples, list) or not samples:
            err(fname, "not a non-empty JSON list")
            continue
        data[fname] = samples
        is_zh = fname.startswith("zh-")
        tot = Counter()
        tot_cats = Counter()
        tot_ovl = []
        rows = []
        for s in samples:
            sid = s.get("sample_id")
            if sid in all_ids:
                err(fname, f"sample_id {sid!r} used twice")
            all_ids.add(sid)
            r = check_sample(fname, s, is_zh)
            tot.update({"conv": 1, "sessions": r["sessions"], "turns": r["turns"], "qa": r["qa"]})
            tot_cats.update(r["cats"])
            tot_ovl += r["overlap"]
            rows.append((sid, r))
        ovl = sum(tot_ovl) / len(tot_ovl) if tot_ovl else 0
        print(f"{fname:<34}{tot['conv']:>5}{tot['sessions']:>6}{tot['turns']:>7}{tot['qa']:>5}"
              + "".join(f"{tot_cats[c]:>5}" for c in (1, 2, 3, 4)) + f"{ovl:>6.2f}")
        for sid, r in rows:
            o = sum(r["overlap"]) / len(r["overlap"]) if r["overlap"] else 0
            print(f"  {str(sid):<32}{1:>5}{r['sessions']:>6}{r['turns']:>7}{r['qa']:>5}"
                  + "".join(f"{r['cats'][c]:>5}" for c in (1, 2, 3, 4)) + f"{o:>6.2f}")
        if is_zh:
            grand.update(tot)
            grand.update({f"c{c}": tot_cats[c] for c in CATS})
    if all(f in data for f in PARALLEL):
        check_parallel(data[PARALLEL[0]], data[PARALLEL[1]])
    if grand["qa"]:
        share = ", ".join(f"{CATS[c]} {grand[f'c{c}'] / grand['qa']:.0%}" for c in (4, 2, 1, 3))
        print(f"Chinese total: {grand['conv']} conversations, {grand['sessions']} sessions, "
              f"{grand['turns']} turns, {grand['qa']} questions ({share})")
    print("ovl: mean share of a question's character bigrams (zh) or words (en) that occur "
          "in its evidence turns")
    print("sha256:")
    for fname in FILES + ["check_retrieval.py"]:
        path = os.path.join(folder, fname)
        if os.path.exists(path):
            with open(path, "rb") as f:
                print(f"  {hashlib.sha256(f.read()).hexdigest()}  {fname}")
    if errors:
        print(f"\n{len(errors)} error(s):", file=sys.stderr)
        for e in errors[:200]:
            print("  " + e, file=sys.stderr)
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
