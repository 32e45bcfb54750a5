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

run_tests
