#!/usr/bin/env python3
"""Validate the scripted scenarios of `thinkus bench session` and print their counts.

Usage: python3 check_sessions.py [FILE ...]
(default: sessions-dev.json and sessions-eval.json next to this script)

Stdlib only. Exits 1 when any rule is broken; warnings do not fail the run.
The rules are described in README.md ("Rules the validator enforces").
"""

import json
import os
import re
import sys
from datetime import datetime, timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_FILES = [os.path.join(HERE, "sessions-dev.json"), os.path.join(HERE, "sessions-eval.json")]

LANGS = ("zh", "en", "mixed")
REQUIRED_DOMAINS = ("finance", "product", "hiring", "marketing", "engineering")
LANG_MIX_PER_FILE = {"zh": 2, "en": 2, "mixed": 1}
SCENARIOS_PER_FILE = 5

SCENARIO_KEYS = {"id", "lang", "domain", "user", "description", "sessions"}
SESSION_KEYS = {"id", "role", "project", "start", "turns"}
TURN_KEYS = {"user", "assistant", "gap_minutes", "tools", "check"}
TOOL_KEYS = {"name", "mime_type", "output", "pad_lines"}
CHECK_KEYS = {"needed", "stale", "forbidden", "note"}

ROLE_RE = re.compile(r"^[a-z][a-z0-9_-]*$")
PROJECT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
RFC3339_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$")
CJK_RE = re.compile(r"[\u3400-\u9fff]")
LATIN_WORD_RE = re.compile(r"[A-Za-z]{3,}")

MAX_ALT_LEN = 40
DEFAULT_GAP = 2


def norm(s):
    """Case-insensitive, whitespace-collapsed form used for every substring test."""
    return re.sub(r"\s+", " ", s).strip().lower()


class Report:
    def __init__(self):
        self.errors = []
        self.warnings = []

    def err(self, where, msg):
        self.errors.append(f"ERROR {where}: {msg}")

    def warn(self, where, msg):
        self.warnings.append(f"warning {where}: {msg}")


def parse_time(s):
    if not isinstance(s, str) or not RFC3339_RE.match(s):
        return None
    try:
        return datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None


class Piece:
    """One recorded text of the scenario (a user message, an answer, a tool output)."""

    def __init__(self, si, ti, kind, text):
        self.si, self.ti, self.kind, self.text = si, ti, kind, norm(text)


def check_structure(sc, where, rep):
    """Types and shapes. Returns False when the scenario is too broken to go on."""
    ok = True
    if not isinstance(sc, dict):
        rep.err(where, "scenario is not an object")
        return False
    for k in sc:
        if k not in SCENARIO_KEYS:
            rep.err(where, f"unknown key {k!r}")
    for k in SCENARIO_KEYS:
        if k not in sc:
            rep.err(where, f"missing key {k!r}")
            ok = False
    if not ok:
        return False
    for k in ("id", "lang", "domain", "user", "description"):
        if not isinstance(sc[k], str) or not sc[k].strip():
            rep.err(where, f"{k} must be a non-empty string")
            ok = False
    if sc.get("lang") not in LANGS:
        rep.err(where, f"lang must be one of {LANGS}")
    if not isinstance(sc["sessions"], list) or not sc["sessions"]:
        rep.err(where, "sessions must be a non-empty list")
        return False
    for si, se in enumerate(sc["sessions"]):
        w = f"{where}/session[{si}]"
        if not isinstance(se, dict):
            rep.err(w, "session is not an object")
            ok = False
            continue
        for k in se:
            if k not in SESSION_KEYS:
                rep.err(w, f"unknown key {k!r}")
        for k in SESSION_KEYS:
            if k not in se:
                rep.err(w, f"missing key {k!r}")
                ok = False
        if not ok:
            continue
        if not isinstance(se["id"], str) or not se["id"]:
            rep.err(w, "id must be a non-empty string")
        if not isinstance(se["role"], str) or not ROLE_RE.match(se["role"]):
            rep.err(w, "role must be a lowercase id")
        if se["project"] is not None and (not isinstance(se["project"], str) or not PROJECT_RE.match(se["project"])):
            rep.err(w, "project must be null or a lowercase id")
        if parse_time(se["start"]) is None:
            rep.err(w, f"start {se['start']!r} is not RFC 3339 with an offset")
            ok = False
        if not isinstance(se["turns"], list) or not se["turns"]:
            rep.err(w, "turns must be a non-empty list")
            ok = False
            continue
        for ti, t in enumerate(se["turns"]):
            wt = f"{w}/turn[{ti}]"
            if not isinstance(t, dict):
                rep.err(wt, "turn is not an object")
                ok = False
                continue
            for k in t:
                if k not in TURN_KEYS:
                    rep.err(wt, f"unknown key {k!r}")
            for k in ("user", "assistant"):
                if not isinstance(t.get(k), str) or not t.get(k, "").strip():
                    rep.err(wt, f"{k} must be a non-empty string")
                    ok = False
            if "gap_minutes" in t:
                g = t["gap_minutes"]
                if isinstance(g, bool) or not isinstance(g, (int, float)) or g < 0:
                    rep.err(wt, "gap_minutes must be a number >= 0")
                    ok = False
            if "tools" in t:
                if not isinstance(t["tools"], list) or not t["tools"]:
                    rep.err(wt, "tools must be a non-empty list when present")
                    ok = False
                    continue
                for ki, tool in enumerate(t["tools"]):
                    wk = f"{wt}/tools[{ki}]"
                    if not isinstance(tool, dict):
                        rep.err(wk, "tool is not an object")
                        ok = False
                        continue
                    for k in tool:
                        if k not in TOOL_KEYS:
                            rep.err(wk, f"unknown key {k!r}")
                    for k in ("name", "mime_type", "output"):
                        if not isinstance(tool.get(k), str) or not tool.get(k, "").strip():
                            rep.err(wk, f"{k} must be a non-empty string")
                            ok = False
                    if "pad_lines" in tool:
                        p = tool["pad_lines"]
                        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= 4000:
                            rep.err(wk, "pad_lines must be an integer 0..4000")
                    if tool.get("mime_type") == "application/json" and isinstance(tool.get("output"), str):
                        try:
                            json.loads(tool["output"])
                        except ValueError as e:
                            rep.err(wk, f"application/json output does not parse: {e}")
                        size = len(tool["output"].encode("utf-8"))
                        if size > 10 * 1024:
                            rep.err(wk, f"JSON output is {size} bytes (> 10 KB)")
                        elif size < 1024:
                            rep.warn(wk, f"JSON output is only {size} bytes (< 1 KB)")
            if "check" in t:
                c = t["check"]
                if not isinstance(c, dict):
                    rep.err(wt, "check is not an object")
                    ok = False
                    continue
                for k in c:
                    if k not in CHECK_KEYS:
                        rep.err(wt, f"unknown check key {k!r}")
                if not isinstance(c.get("needed"), list):
                    rep.err(wt, "check.needed must be a list (possibly empty)")
                    ok = False
                else:
                    for fi, fact in enumerate(c["needed"]):
                        if not isinstance(fact, list) or not 1 <= len(fact) <= 3:
                            rep.err(wt, f"needed[{fi}] must be a list of 1 to 3 alternatives")
                            ok = False
                            continue
                        for a in fact:
                            if not isinstance(a, str) or len(a.strip()) < 2 or len(a) > MAX_ALT_LEN:
                                rep.err(wt, f"needed[{fi}] alternative {a!r} must be a string of 2..{MAX_ALT_LEN} chars")
                                ok = False
                            elif not CJK_RE.search(a) and len(a.strip()) < 3:
                                rep.warn(wt, f"needed alternative {a!r} is very short")
                for k in ("stale", "forbidden"):
                    if k in c:
                        if not isinstance(c[k], list) or not all(isinstance(x, str) and len(x.strip()) >= 2 for x in c[k]):
                            rep.err(wt, f"check.{k} must be a list of strings of 2+ chars")
                            ok = False
                if not isinstance(c.get("note"), str) or not c.get("note", "").strip():
                    rep.err(wt, "check.note must be a non-empty string")
    return ok


def check_language(sc, where, rep):
    msgs = [t["user"] for se in sc["sessions"] for t in se["turns"]]
    with_cjk = sum(1 for m in msgs if CJK_RE.search(m))
    latin_only = sum(1 for m in msgs if not CJK_RE.search(m) and LATIN_WORD_RE.search(m))
    lang = sc["lang"]
    if lang == "zh" and with_cjk < 0.9 * len(msgs):
        rep.err(where, f"lang zh but only {with_cjk}/{len(msgs)} user messages contain Chinese")
    if lang == "en" and with_cjk:
        rep.err(where, f"lang en but {with_cjk} user messages contain Chinese")
    if lang == "mixed":
        mixed_msgs = sum(1 for m in msgs if CJK_RE.search(m) and LATIN_WORD_RE.search(m))
        if not with_cjk or not (latin_only or mixed_msgs >= 3):
            rep.err(where, "lang mixed needs Chinese messages and English (whole messages or English terms in 3+ messages)")


def check_scenario(sc, where, rep, stats):
    sessions = sc["sessions"]
    # ---- sessions, time, sizes -------------------------------------------------
    if not 3 <= len(sessions) <= 6:
        rep.err(where, f"{len(sessions)} sessions (want 3..6)")
    ids = [se["id"] for se in sessions]
    if len(set(ids)) != len(ids):
        rep.err(where, "session ids are not unique")
    starts, ends = [], []
    for se in sessions:
        st = parse_time(se["start"])
        total = sum(t.get("gap_minutes", DEFAULT_GAP) for t in se["turns"][1:])
        starts.append(st)
        ends.append(st + timedelta(minutes=total))
    for i in range(1, len(sessions)):
        if starts[i] < ends[i - 1]:
            rep.err(where, f"session {ids[i]} starts {starts[i]} before {ids[i-1]} ends {ends[i-1]}")
    days = (starts[-1].date() - starts[0].date()).days + 1
    if not 3 <= days <= 10:
        rep.err(where, f"sessions span {days} calendar days (want 3..10)")
    nturns = sum(len(se["turns"]) for se in sessions)
    if not 30 <= nturns <= 45:
        rep.err(where, f"{nturns} turns (want 30..45)")
    roles = {se["role"] for se in sessions}
    if len(roles) < 2:
        rep.err(where, "fewer than 2 roles")
    projects = {se["project"] for se in sessions if se["project"] is not None}
    if not 1 <= len(projects) <= 2:
        rep.err(where, f"{len(projects)} projects (want 1 or 2)")

    # ---- every recorded text, in order -----------------------------------------
    pieces = []
    for si, se in enumerate(sessions):
        for ti, t in enumerate(se["turns"]):
            pieces.append(Piece(si, ti, "user", t["user"]))
            pieces.append(Piece(si, ti, "assistant", t["assistant"]))
            for tool in t.get("tools", []):
                pieces.append(Piece(si, ti, "tool", tool["output"]))

    def earlier(si, ti):
        return [p for p in pieces if (p.si, p.ti) < (si, ti)]

    def visible(si, ti):
        """What the role of session si may know before turn ti (the visibility model)."""
        se = sessions[si]
        out = []
        for p in earlier(si, ti):
            other = sessions[p.si]
            if p.si == si or other["role"] == se["role"] or (se["project"] is not None and other["project"] == se["project"]):
                out.append(p)
        return out

    def own_role(si, ti):
        se = sessions[si]
        return [p for p in earlier(si, ti) if p.si == si or sessions[p.si]["role"] == se["role"]]

    def has(ps, s):
        s = norm(s)
        return any(s in p.text for p in ps)

    def first_pos(ps, s):
        s = norm(s)
        for p in ps:
            if s in p.text:
                return (p.si, p.ti)
        return None

    def last_pos(ps, s):
        s = norm(s)
        found = None
        for p in ps:
            if s in p.text:
                found = (p.si, p.ti)
        return found

    nchecks = 0
    n = {"stale": 0, "wherewere": 0, "cross": 0, "tool": 0, "tool_later": 0, "empty": 0, "forbidden": 0}
    for si, se in enumerate(sessions):
        for ti, t in enumerate(se["turns"]):
            if "check" not in t:
                continue
            nchecks += 1
            c = t["check"]
            w = f"{where}/{se['id']}/turn[{ti}]"
            before = earlier(si, ti)
            vis = visible(si, ti)
            mine = own_role(si, ti)
            needed = c["needed"]
            stale = c.get("stale", [])
            forbidden = c.get("forbidden", [])
            alts = [a for fact in needed for a in fact]
            if not needed:
                n["empty"] += 1
                if stale or forbidden:
                    pass  # allowed: a lean check may still list what must not leak
            is_tool = is_tool_later = is_cross = False
            for fi, fact in enumerate(needed):
                for a in fact:
                    if not has(before, a):
                        rep.err(w, f"needed alternative {a!r} does not occur in an earlier turn")
                if not any(has(vis, a) for a in fact):
                    rep.err(w, f"needed[{fi}] {fact} is not visible to role {se['role']} / project {se['project']} "
                               "(said only to another role outside this project)")
                for a in fact:
                    for p in vis:
                        if p.kind == "tool" and norm(a) in p.text:
                            is_tool = True
                            if p.si < si:
                                is_tool_later = True
                if se["project"] is not None and not any(has(mine, a) for a in fact):
                    if any(has([p for p in vis if sessions[p.si]["role"] != se["role"]
                                and sessions[p.si]["project"] == se["project"]], a) for a in fact):
                        is_cross = True
            for s in stale:
                if not has(before, s):
                    rep.err(w, f"stale {s!r} does not occur in an earlier turn")
                elif not has(vis, s):
                    rep.err(w, f"stale {s!r} was never visible to this role/project")
                for a in alts:
                    if norm(s) in norm(a):
                        rep.err(w, f"stale {s!r} is a substring of needed alternative {a!r}")
                if not needed:
                    rep.err(w, f"stale {s!r} listed but nothing is needed (the replacement should be needed)")
                else:
                    fp = first_pos(before, s)
                    if fp is not None and not any((last_pos(before, a) or (-1, -1)) > fp for a in alts):
                        rep.err(w, f"stale {s!r}: no needed value is said after it (where is its replacement?)")
            if stale:
                n["stale"] += 1
            for f in forbidden:
                if not has(before, f):
                    rep.err(w, f"forbidden {f!r} does not occur in an earlier turn")
                if has(vis, f):
                    rep.err(w, f"forbidden {f!r} is legitimately visible to this role/project")
                src = [p for p in before if norm(f) in p.text]
                if src and not any(sessions[p.si]["project"] is None and sessions[p.si]["role"] != se["role"] for p in src):
                    rep.err(w, f"forbidden {f!r} was not told to another role outside any project")
                for a in alts:
                    if norm(f) in norm(a) or norm(a) in norm(f):
                        rep.err(w, f"forbidden {f!r} overlaps needed alternative {a!r}")
            if forbidden:
                n["forbidden"] += 1
            # a "where were we" check: first message of a session that follows, within 1..120
            # minutes, a session of the same role and project
            if ti == 0 and si > 0:
                prev = sessions[si - 1]
                gap = (starts[si] - ends[si - 1]).total_seconds() / 60
                if prev["role"] == se["role"] and prev["project"] == se["project"] and 1 <= gap <= 120:
                    if not needed:
                        rep.err(w, "resumed session's first check needs the last session's key points")
                    else:
                        prev_p = [p for p in pieces if p.si == si - 1]
                        for fact in needed:
                            if not any(has(prev_p, a) for a in fact):
                                rep.err(w, f"where-were-we fact {fact} is not from the previous session")
                        n["wherewere"] += 1
            if is_tool:
                n["tool"] += 1
            if is_tool_later:
                n["tool_later"] += 1
            if is_cross:
                n["cross"] += 1
            if not isinstance(c.get("note"), str):
                rep.err(w, "note missing")

    if not 10 <= nchecks <= 15:
        rep.err(where, f"{nchecks} checks (want 10..15)")
    wants = {"stale": 2, "wherewere": 1, "cross": 1, "tool": 1, "tool_later": 1, "empty": 2, "forbidden": 1}
    names = {"stale": "stale-value checks", "wherewere": "where-were-we checks", "cross": "cross-role checks",
             "tool": "tool-output checks", "tool_later": "tool-output checks in a later session",
             "empty": "needed:[] checks", "forbidden": "checks with forbidden"}
    for k, v in wants.items():
        if n[k] < v:
            rep.err(where, f"{n[k]} {names[k]} (want >= {v})")

    tools = [tool for se in sessions for t in se["turns"] for tool in t.get("tools", [])]
    long_logs = [tool for tool in tools if tool.get("pad_lines", 0) >= 2000]
    stats["scenarios"] += 1
    stats["sessions"] += len(sessions)
    stats["turns"] += nturns
    stats["checks"] += nchecks
    stats["tools"] += len(tools)
    stats["long_logs"] += len(long_logs)
    stats["scen_with_long_log"] += 1 if long_logs else 0
    stats["pad_lines"] += sum(tool.get("pad_lines", 0) for tool in tools)
    stats["tool_bytes"] += sum(len(tool["output"].encode("utf-8")) for tool in tools)
    for k in n:
        stats["k_" + k] += n[k]
    lang = sc["lang"]
    for k, v in (("scenarios", 1), ("sessions", len(sessions)), ("turns", nturns), ("checks", nchecks)):
        stats.setdefault("lang", {}).setdefault(lang, {"scenarios": 0, "sessions": 0, "turns": 0, "checks": 0})[k] += v
    stats.setdefault("rows", []).append(
        (sc["id"], lang, sc["domain"], len(sessions), nturns, nchecks, days, len(roles), len(projects),
         n["stale"], n["wherewere"], n["cross"], n["tool"], n["empty"], n["forbidden"], len(long_logs)))


def check_file(path, rep, seen_ids, seen_users):
    name = os.path.basename(path)
    prefix = "eval-" if "eval" in name else "dev-"
    stats = {k: 0 for k in ("scenarios", "sessions", "turns", "checks", "tools", "long_logs", "scen_with_long_log",
                            "pad_lines", "tool_bytes", "k_stale", "k_wherewere", "k_cross", "k_tool",
                            "k_tool_later", "k_empty", "k_forbidden")}
    try:
        with open(path, encoding="utf-8") as f:
            raw = f.read()
        data = json.loads(raw)
    except (OSError, ValueError) as e:
        rep.err(name, f"cannot load: {e}")
        return None
    if raw != json.dumps(data, ensure_ascii=False, indent=2) + "\n":
        rep.warn(name, "not in canonical form (json.dumps(indent=2, ensure_ascii=False) plus a newline)")
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("scenarios"), list):
        rep.err(name, 'top level must be {"version": 1, "scenarios": [...]}')
        return None
    if set(data) != {"version", "scenarios"}:
        rep.err(name, f"unknown top-level keys {sorted(set(data) - {'version', 'scenarios'})}")
    scs = data["scenarios"]
    if len(scs) != SCENARIOS_PER_FILE:
        rep.err(name, f"{len(scs)} scenarios (want {SCENARIOS_PER_FILE})")
    langs = {}
    domains = set()
    for i, sc in enumerate(scs):
        where = f"{name}#{i}"
        if not check_structure(sc, where, rep):
            continue
        where = f"{name}:{sc['id']}"
        if not sc["id"].startswith(prefix):
            rep.err(where, f"id must start with {prefix!r}")
        if sc["id"] in seen_ids:
            rep.err(where, "duplicate scenario id")
        seen_ids.add(sc["id"])
        if sc["user"] in seen_users:
            rep.err(where, "user id is shared with another scenario")
        seen_users.add(sc["user"])
        langs[sc["lang"]] = langs.get(sc["lang"], 0) + 1
        domains.add(sc["domain"])
        check_language(sc, where, rep)
        check_scenario(sc, where, rep, stats)
    if langs != LANG_MIX_PER_FILE:
        rep.err(name, f"languages {langs} (want {LANG_MIX_PER_FILE})")
    missing = [d for d in REQUIRED_DOMAINS if d not in domains]
    if missing:
        rep.err(name, f"domains missing: {missing}")
    return stats


def main():
    files = sys.argv[1:] or DEFAULT_FILES
    rep = Report()
    seen_ids, seen_users = set(), set()
    all_stats = []
    for path in files:
        st = check_file(path, rep, seen_ids, seen_users)
        if st is not None:
            all_stats.append((os.path.basename(path), st))
    for name, st in all_stats:
        print(f"== {name}")
        print(f"  scenarios {st['scenarios']}, sessions {st['sessions']}, turns {st['turns']}, checks {st['checks']}")
        for lang in LANGS:
            v = st.get("lang", {}).get(lang)
            if v:
                print(f"  {lang:5s}: scenarios {v['scenarios']}, sessions {v['sessions']}, turns {v['turns']}, checks {v['checks']}")
        print(f"  checks by kind: stale {st['k_stale']}, where-were-we {st['k_wherewere']}, cross-role {st['k_cross']}, "
              f"tool-output {st['k_tool']} (in a later session {st['k_tool_later']}), needed-empty {st['k_empty']}, "
              f"forbidden {st['k_forbidden']}")
        print(f"  tool outputs {st['tools']} ({st['tool_bytes']} bytes written), long logs (pad_lines >= 2000) "
              f"{st['long_logs']} in {st['scen_with_long_log']} scenarios, pad lines {st['pad_lines']}")
        print("  id                     lang  domain       ses turns chk days roles proj | stale wwr cross tool empty forb logs")
        for r in st.get("rows", []):
            print(f"  {r[0]:22s} {r[1]:5s} {r[2]:12s} {r[3]:3d} {r[4]:5d} {r[5]:3d} {r[6]:4d} {r[7]:5d} {r[8]:4d} |"
                  f" {r[9]:5d} {r[10]:3d} {r[11]:5d} {r[12]:4d} {r[13]:5d} {r[14]:4d} {r[15]:4d}")
    for w in rep.warnings:
        print(w)
    for e in rep.errors:
        print(e)
    if rep.errors:
        print(f"FAILED: {len(rep.errors)} errors")
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
