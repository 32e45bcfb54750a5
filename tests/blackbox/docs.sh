# The protocol has two descriptions, spool-layout/README.md (the long one)
# and kart-spool(5) (the page): they must agree on the names in a spool,
# the states of an id and the statuses of a result, and the statuses must
# be the ones kart status knows. A name added to one and not the other
# fails here.
. "$(dirname "$0")/../lib.sh"

# facts WHAT: one line per fact, sorted, from both documents; prints
# "readme: ..." / "man: ..." / "code: ..." lists for the diff.
facts() {
	python3 - "$ROOT" "$1" <<'EOF'
import re, sys
root, what = sys.argv[1], sys.argv[2]
readme = open(root + "/spool-layout/README.md", encoding="utf-8").read()
man = open(root + "/docs/kart-spool.5", encoding="utf-8").read()

def man_section(name):
    m = re.search(r"^\.SH " + re.escape(name) + r"\n(.*?)(?=^\.SH )", man, re.S | re.M)
    if not m:
        sys.exit("kart-spool(5) has no section " + name)
    return m.group(1)

def roff_words(line):
    # ".IB SPOOL /cur/ WORKER /.lock" -> "SPOOL/cur/WORKER/.lock"
    parts = line.split(None, 1)[1].split() if " " in line else []
    return "".join(parts).replace("\\-", "-").replace("\\&", "")

def readme_names():
    # The tree in section 1: indentation is depth (2 spaces), the first
    # word is the entry; a directory ends in '/'.
    sec = readme[readme.index("## 1. Layout"):readme.index("## 2.")]
    block = sec[sec.index("```\n") + 4:]
    block = block[:block.index("```")]
    stack, out = [], []
    for line in block.splitlines():
        if not line.strip():
            continue
        ind = (len(line) - len(line.lstrip(" "))) // 2
        word = line.split()[0]
        if not re.match(r"^[A-Za-z.<]", word):
            continue  # a continued description
        if ind > len(stack):
            continue  # deeper than a parent: a continued description
        stack = stack[:ind] + [word]
        out.append("".join(stack))
    paths = set(out)
    # Leaves only: a directory that holds a listed entry is implied.
    return {p for p in paths if not any(q != p and q.startswith(p) and p.endswith("/") for q in paths)}

def man_names():
    syn = man_section("SYNOPSIS")
    return {roff_words(l) for l in syn.splitlines() if l.startswith((".IB", ".BI", ".I ", ".B "))}

def readme_table(marker):
    i = readme.index(marker)
    rows = []
    for line in readme[i:].splitlines()[1:]:
        l = line.strip()
        if rows and not l.startswith("|"):
            break
        if l.startswith("|") and not l.startswith("|---") and not l.startswith("| state") \
                and not l.startswith("| status"):
            rows.append(l.split("|")[1].strip().strip("`"))
    return set(rows)

def man_states():
    sec = man_section("STATES")
    return set(re.findall(r"^\.TP\n\.B (\S+)", sec, re.M))

def man_statuses():
    res = man_section("THE RESULT")
    m = re.search(r"^\.B status\n(.*?)^\.TP", res, re.S | re.M)
    return set(re.findall(r"^\.BR? (\w+)", m.group(1), re.M))

def code_statuses():
    src = open(root + "/src/cmd/selection.c", encoding="utf-8").read()
    m = re.search(r"selection_states\[\] = \{(.*?)\};", src, re.S)
    return set(re.findall(r'"(\w+)"', m.group(1))) - {"queued", "scheduled", "waiting", "held", "running", "paused"}

if what == "names":
    sets = {"readme": readme_names(), "man": man_names()}
elif what == "states":
    sets = {"readme": readme_table("**States.**"), "man": man_states()}
else:
    sets = {"readme": readme_table("**Statuses**"), "man": man_statuses(), "code": code_statuses()}
for k, v in sets.items():
    print("%s: %s" % (k, " ".join(sorted(v))))
EOF
}

# agree WHAT MIN: every list the same, and at least MIN facts in it (so
# that a parser that finds nothing cannot pass).
agree() {
	local out first n line
	out=$(facts "$1") || { fail "$1: $out"; return; }
	first=$(head -1 <<<"$out" | cut -d' ' -f2-)
	n=$(wc -w <<<"$first")
	[ "$n" -ge "$2" ] || fail "$1: only $n found: $first"
	while IFS= read -r line; do
		assert_eq "$first" "${line#*: }" "$1 in ${line%%:*} (against the README)"
	done <<<"$out"
}

test_spool_names_agree() { agree names 18; }
test_states_agree() { agree states 5; }
test_statuses_agree() { agree statuses 9; }

# The check itself must be able to fail: a name in one document only.
test_disagreement_is_caught() {
	local d=$T_ROOT/docs; mkdir -p "$d/spool-layout" "$d/docs" "$d/src/cmd"
	cp "$ROOT/spool-layout/README.md" "$d/spool-layout/"
	cp "$ROOT/src/cmd/cmd_status.c" "$d/src/cmd/"
	sed '/^\.IB SPOOL \/done\/\.empty$/d' "$ROOT/docs/kart-spool.5" >"$d/docs/kart-spool.5"
	local out; out=$(ROOT=$d facts names)
	assert_ne "$(sed -n 1p <<<"$out" | cut -d' ' -f2-)" "$(sed -n 2p <<<"$out" | cut -d' ' -f2-)" \
		"names with done/.empty dropped from the page"
}

# ---- docs/DESIGN.md stays true ----------------------------------------
# The map names every file of src/ and no other; each folder includes only
# what "The layers" allows; the files that still spell a result's names
# are the ones DESIGN.md lists; no document, comment or test names a test
# case that does not exist. design_check WHAT prints what is wrong, one
# line each, and fails; ROOT may be a copy (the tests below break one).

# Files of branches not merged yet, which the map may name ahead of
# them: a name here may be absent. Empty once every branch has landed.
MAP_LANDING=""

design_check() {
	MAP_LANDING=$MAP_LANDING python3 - "$ROOT" "$1" <<'EOF'
import os, re, sys
root, what = sys.argv[1], sys.argv[2]
design = open(root + "/docs/DESIGN.md", encoding="utf-8").read()
landing = set(os.environ.get("MAP_LANDING", "").split())
bad = []

def block(name):
    m = re.search(r"<!-- %s: [^>]*-->\n```\n(.*?)```\n<!-- /%s -->" % (name, name), design, re.S)
    if not m:
        sys.exit("docs/DESIGN.md has no <!-- %s: ... --> block" % name)
    return m.group(1)

def walk(top, exts):
    out = []
    for d, dirs, files in os.walk(os.path.join(root, top)):
        dirs[:] = [x for x in dirs if x not in ("build", ".git", "__pycache__")]
        out += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith(exts)]
    return sorted(out)

src = walk("src", (".c", ".h", ".py"))

if what == "map":
    named, folder = [], None
    for line in block("map").splitlines():
        if re.match(r"src/\S+/", line):
            folder = line.split()[0]
            if not os.path.isdir(os.path.join(root, folder)):
                bad.append("the map's folder %s does not exist" % folder)
            continue
        m = re.match(r"  (\S+)\s", line + " ")
        if not m or folder is None:
            continue  # a description's second line
        w = m.group(1)
        names = [w[:-5] + ".c", w[:-5] + ".h"] if w.endswith(".[ch]") else [w]
        named += [folder + n for n in names]
    for f in named:
        if f not in src and f not in landing:
            bad.append("the map names %s, which does not exist" % f)
    for f in src:
        if f not in named:
            bad.append("%s is not in docs/DESIGN.md's map" % f)
    # Any other file the note names exists (in src/, tests/, bench/, contrib/).
    known = {os.path.basename(f) for t in ("src", "tests", "bench", "contrib")
             for f in walk(t, (".c", ".h", ".py", ".sh"))}
    known |= {os.path.basename(f) for f in landing}
    for w in sorted(set(re.findall(r"(?<![\w/*-])([a-z][a-z0-9_-]*\.(?:c|h|py|sh))\b", design))):
        if w not in known:
            bad.append("docs/DESIGN.md names %s, which does not exist" % w)

elif what == "layers":
    allow, exc = {}, {}
    for line in block("layers").splitlines():
        w = line.split()
        if not w:
            continue
        if w[0] == "except":
            exc[w[1].rstrip(":")] = set(x for x in w[2:] if x.endswith(".h"))
        else:
            allow[w[0]] = set(x for x in w[1:] if x != "-")
    where = {}
    for f in src:
        if f.endswith(".h"):
            where[os.path.basename(f)] = f.split("/")[1]
    for f in src:
        if not f.endswith((".c", ".h")):
            continue
        mine = f.split("/")[1]
        if mine not in allow:
            bad.append("folder %s/ is not in docs/DESIGN.md's layers" % mine)
            continue
        rel = f[len("src/"):]
        for h in re.findall(r'^\s*#\s*include\s+"([^"]+)"', open(os.path.join(root, f), encoding="utf-8").read(), re.M):
            theirs = where.get(os.path.basename(h))
            if theirs is None or theirs == mine or theirs in allow[mine] or h in exc.get(rel, ()):
                continue
            bad.append("%s includes %s (%s/), which docs/DESIGN.md's layers do not allow" % (f, h, theirs))

elif what == "spelled":
    listed = set(block("spelled").split())
    spells = re.compile(r'%[sd]\.(?:json|task|attempts)"|"\.(?:json|task|attempts)"')
    found = set()
    for f in src:
        if f.endswith((".c", ".h")) and not f.startswith("src/spool/spool_name.") \
                and spells.search(open(os.path.join(root, f), encoding="utf-8").read()):
            found.add(f)
    for f in sorted(found - listed):
        bad.append("%s spells a result's .json, .task or .attempts: use spool_name.h (or list it in docs/DESIGN.md)" % f)
    for f in sorted(listed - found):
        bad.append("docs/DESIGN.md lists %s as spelling names, and it no longer does: take it off" % f)

elif what == "tests":
    files = []
    for t in ("docs", "spool-layout", "src", "tests", "bench", "contrib"):
        files += walk(t, (".c", ".h", ".py", ".sh", ".md", ".1", ".5", ".8", ".txt"))
    files += [f for f in ("README.md", "Makefile") if os.path.exists(os.path.join(root, f))]
    defs, byfile = set(), {}
    for f in files:
        if not f.startswith("tests/"):
            continue
        b = os.path.basename(f)
        m = re.match(r"(test_\w+)\.(c|sh|py)$", b)
        if m:
            defs.add(m.group(1))
        text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
        d = set(re.findall(r"(?:^|&&|;|\|\|)\s*(?:static\s+void\s+)?(test_\w+)\s*\(", text, re.M))
        d |= set(re.findall(r"^\s*def\s+(test_\w+)", text, re.M))
        defs |= d
        byfile.setdefault(b, set()).update(d)
    for f in files:
        text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
        for t in sorted(set(re.findall(r"\btest_[a-z0-9_]+\b", text))):
            if t not in defs:
                bad.append("%s names %s, which no test defines" % (f, t))
        # "confine.sh CASE", "test_lifecycle.c `CASE`": CASE defined in that file.
        for fn, t in set(re.findall(r"\b([\w-]+\.(?:sh|c))[`'\"]?[ :(`]{1,3}(test_[a-z0-9_]+)\b", text)):
            if fn in byfile and t in defs and t not in byfile[fn]:
                bad.append("%s names %s %s, which that file does not define" % (f, fn, t))

for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
}

# Each check passes on this tree, and found something to look at.
design_ok() {
	local out
	out=$(design_check "$1" 2>&1) || fail "docs/DESIGN.md ($1):
$out"
}

test_design_map() { design_ok map; }
test_layers() { design_ok layers; }
test_names_spelled() { design_ok spelled; }
test_named_tests_exist() { design_ok tests; }

# The checks can fail: each is run on a copy broken one way.
design_copy() {
	D=$T_ROOT/design; rm -rf "$D"; mkdir -p "$D"
	(cd "$ROOT" && tar cf - docs spool-layout src tests bench contrib README.md Makefile) |
		tar xf - -C "$D"
}
design_fails() { # what expected-line
	local out
	if out=$(ROOT=$D design_check "$1" 2>&1); then
		fail "$1: a broken copy passed"
	else
		[[ $out == *"$2"* ]] || fail "$1 on a broken copy: wanted '$2', got: $out"
	fi
}

test_design_checks_fail() {
	design_copy
	: >"$D/src/lib/dummy.c"
	design_fails map "src/lib/dummy.c is not in docs/DESIGN.md's map"
	design_copy
	sed -i 's|^  prioq\.\[ch\] |  prioqx.[ch]|' "$D/docs/DESIGN.md"
	design_fails map "the map names src/lib/prioqx.c, which does not exist"
	design_copy
	sed -i '1a #include "worker_int.h"' "$D/src/spool/space.c"
	design_fails layers "src/spool/space.c includes worker_int.h (worker/)"
	design_copy
	echo 'static const char *x = "%s.json";' >>"$D/src/spool/space.c"
	design_fails spelled "src/spool/space.c spells a result's"
	design_copy
	# (the names are cut in two here, so that this file names no such test)
	echo 'The map is held by `docs.sh test_''no_such_case`.' >>"$D/docs/SYNC.md"
	design_fails tests "docs/SYNC.md names test_""no_such_case, which no test defines"
	design_copy
	echo '/* see confine.sh test_''hostile_battery */' >>"$D/src/lib/util.h"
	design_fails tests "src/lib/util.h names confine.sh test_""hostile_battery, which that file does not define"
}

run_tests
