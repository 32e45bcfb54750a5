/* test_cgroup.c - the cgroup leaf of a task (src/cgroup.c) on a fake
 * cgroupfs of plain files: what is written where on v2 and on v1/hybrid,
 * the parsing of the kernel's files, refusal when a step fails; and the
 * join step of run_spawn_join (src/run.c): nothing is exec'd before it. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "run.h"
#include "util.h"

/* ---- a fake tree ------------------------------------------------------------ */

static char root[256];
/* The fixture of the tests on a fake tree, fresh for each (tree_setup):
 * the worker's host, a task's leaf, and the error of the last call. */
static struct cg_host h;
static struct cg_leaf l;
static char err[256];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

static int tree_setup(void **state)
{
	(void)state;
	const char *tmp = getenv("TMPDIR");
	snprintf(root, sizeof root, "%s/kart-cgtest.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root))
		return -1;
	memset(&h, 0, sizeof h);
	memset(&l, 0, sizeof l);
	err[0] = '\0';
	return 0;
}

static int tree_teardown(void **state)
{
	(void)state;
	return nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* mkdir -p ROOT/rel */
static void mkd(const char *rel)
{
	char p[1024], *s;
	snprintf(p, sizeof p, "%s/%s", root, rel);
	for (s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		(void)mkdir(p, 0755);
		*s = '/';
	}
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", p, strerror(errno));
}

static void put(const char *rel, const char *text)
{
	char p[1024];
	snprintf(p, sizeof p, "%s/%s", root, rel);
	FILE *f = fopen(p, "w");
	if (!f)
		fail_msg("create %s: %s", p, strerror(errno));
	fputs(text, f);
	fclose(f);
}

/* The text of ROOT/rel, or NULL if there is no such file. */
static char *get(const char *rel)
{
	char p[1024], *out = NULL;
	snprintf(p, sizeof p, "%s/%s", root, rel);
	if (read_file_at(AT_FDCWD, p, 65536, &out, NULL) < 0)
		return NULL;
	return out;
}

static void assert_file_is(const char *rel, const char *want)
{
	char *got = get(rel);
	if (!got)
		fail_msg("%s: missing, expected '%s'", rel, want);
	if (strcmp(got, want) != 0)
		fail_msg("%s: expected '%s', got '%s'", rel, want, got);
	free(got);
}

static bool is_there(const char *rel)
{
	char p[1024];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s", root, rel);
	return lstat(p, &st) == 0;
}

static void host(struct cg_host *hp, const char *self, const char *parent)
{
	assert_int_equal(cg_host_init(hp, root, self, parent), 0);
	hp->fake = true;
}

static const struct cg_limits all_limits = {.memory = 64ull << 20, .pids = 32, .cpu_milli = 250};
static const struct cg_limits no_limits = {0};

/* ---- parsing ------------------------------------------------------------------ */

static void test_parse_memory_events(void **state)
{
	(void)state;
	int64_t v = -7;
	const char *ev = "low 0\nhigh 0\nmax 120\noom 3\noom_kill 2\noom_group_kill 1\n";
	assert_int_equal(cg_parse_keyed(ev, "oom_kill", &v), 0);
	assert_int_equal(v, 2); /* not oom (3) nor oom_group_kill (1) */
	assert_int_equal(cg_parse_keyed(ev, "oom", &v), 0);
	assert_int_equal(v, 3);
	assert_int_equal(cg_parse_keyed("low 0\nhigh 0\n", "oom_kill", &v), -ENOENT);
	assert_int_equal(cg_parse_keyed("oom_kill x\n", "oom_kill", &v), -EINVAL);
	assert_int_equal(cg_parse_keyed("oom_kill\n", "oom_kill", &v), -ENOENT);
	assert_int_equal(cg_parse_keyed("", "oom_kill", &v), -ENOENT);
}

static void test_parse_cpu_stat(void **state)
{
	(void)state;
	int64_t v = -7;
	const char *st = "usage_usec 1534000\nuser_usec 1234567\nsystem_usec 299433\n"
			 "nr_periods 40\nnr_throttled 30\nthrottled_usec 2500000\n";
	assert_int_equal(cg_parse_keyed(st, "user_usec", &v), 0);
	assert_int_equal(v, 1234567);
	assert_int_equal(cg_parse_keyed(st, "system_usec", &v), 0);
	assert_int_equal(v, 299433);
	assert_int_equal(cg_parse_keyed(st, "usage_usec", &v), 0);
	assert_int_equal(v, 1534000);
	/* No trailing newline on the last line. */
	assert_int_equal(cg_parse_keyed("user_usec 5", "user_usec", &v), 0);
	assert_int_equal(v, 5);
}

static void test_parse_oom_control(void **state)
{
	(void)state;
	int64_t v = -7;
	const char *oc = "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n";
	assert_int_equal(cg_parse_keyed(oc, "oom_kill", &v), 0);
	assert_int_equal(v, 4); /* not oom_kill_disable */
	assert_int_equal(cg_parse_keyed("oom_kill_disable 1\nunder_oom 0\n", "oom_kill", &v),
			 -ENOENT);
}

static void test_parse_peak(void **state)
{
	(void)state;
	int64_t v = -7;
	assert_int_equal(cg_parse_int("67108864\n", &v), 0);
	assert_int_equal(v, 67108864);
	assert_int_equal(cg_parse_int("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(cg_parse_int("max\n", &v), -EINVAL);
	assert_int_equal(cg_parse_int("", &v), -EINVAL);
	assert_int_equal(cg_parse_int("12 34\n", &v), -EINVAL);
	assert_int_equal(cg_parse_int("-5\n", &v), -EINVAL);
	assert_int_equal(cg_parse_int("99999999999999999999999\n", &v), -ERANGE);
}

static void test_parse_pressure(void **state)
{
	(void)state;
	int64_t v = -1;
	const char *p = "some avg10=0.12 avg60=0.05 avg300=0.01 total=123456\n"
			"full avg10=0.00 avg60=0.00 avg300=0.00 total=789\n";
	assert_int_equal(cg_parse_pressure(p, "some", &v), 0);
	assert_int_equal(v, 123456);
	assert_int_equal(cg_parse_pressure(p, "full", &v), 0);
	assert_int_equal(v, 789);
	assert_int_equal(cg_parse_pressure("some avg10=0.00 total=5\n", "full", &v), -ENOENT);
	assert_int_equal(v, 789); /* untouched */
	assert_int_equal(cg_parse_pressure("some avg10=0.00\nfull total=1\n", "some", &v), -EINVAL);
	assert_int_equal(cg_parse_pressure("some total=x\n", "some", &v), -EINVAL);
	assert_int_equal(cg_parse_pressure("some total=-4\n", "some", &v), -EINVAL);
	assert_int_equal(cg_parse_pressure("somewhat total=4\n", "some", &v), -ENOENT);
}

static void test_parse_ctls(void **state)
{
	(void)state;
	assert_int_equal(cg_parse_ctls("cpuset cpu io memory hugetlb pids rdma misc\n"),
			 CG_CTL_MEMORY | CG_CTL_PIDS | CG_CTL_CPU);
	assert_int_equal(cg_parse_ctls("cpuset io\n"), 0);
	assert_int_equal(cg_parse_ctls("+memory\n+pids\n"), CG_CTL_MEMORY | CG_CTL_PIDS);
	assert_int_equal(cg_parse_ctls("cpuacct cpuset\n"), 0); /* "cpu" is a whole word */
	assert_int_equal(cg_parse_ctls(""), 0);
}

/* ---- v2 ---------------------------------------------------------------------- */

/* A delegated cgroup2 tree: ROOT is the mount, the worker sits in
 * /work.slice/kart.service with the memory, pids and cpu controllers. */
static void v2_tree(const char *controllers)
{
	put("cgroup.controllers", "cpuset cpu io memory pids\n");
	mkd("work.slice/kart.service");
	put("work.slice/kart.service/cgroup.controllers", controllers);
	put("work.slice/kart.service/cgroup.subtree_control", "");
	put("work.slice/kart.service/cgroup.procs", "4242\n");
}

#define V2 "work.slice/kart.service/"

/* The worker's host on that tree, in /work.slice/kart.service. */
static void v2_host(struct cg_host *hp, const char *controllers)
{
	v2_tree(controllers);
	host(hp, "0::/work.slice/kart.service\n", NULL);
}

static void test_v2_writes(void **state)
{
	(void)state;
	char want[64];
	v2_host(&h, "cpuset cpu io memory pids\n");
	assert_int_equal(h.mode, CG_MODE_V2);
	assert_true(h.self_in_parent);
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &all_limits, err, sizeof err), 0);
	assert_int_equal(l.mode, CG_MODE_V2);

	/* No internal processes: the worker moved itself out before the
	 * controllers were enabled for the leaves. */
	snprintf(want, sizeof want, "%d\n", (int)getpid());
	assert_file_is(V2 "kart.worker/cgroup.procs", want);
	assert_file_is(V2 "cgroup.subtree_control", "+memory\n+pids\n+cpu\n");
	assert_int_equal(h.ctls, CG_CTL_MEMORY | CG_CTL_PIDS | CG_CTL_CPU);

	assert_file_is(V2 "kart.7.1/memory.max", "67108864\n");
	assert_file_is(V2 "kart.7.1/memory.swap.max", "0\n");
	assert_file_is(V2 "kart.7.1/memory.oom.group", "1\n");
	assert_file_is(V2 "kart.7.1/pids.max", "32\n");
	assert_file_is(V2 "kart.7.1/cpu.max", "25000 100000\n");

	assert_int_equal(cg_join(&l, 31337), 0);
	assert_file_is(V2 "kart.7.1/cgroup.procs", "31337\n");

	/* A second leaf: the parent is prepared once. */
	struct cg_leaf l2;
	assert_int_equal(cg_leaf_create(&h, &l2, "kart.7.2", &no_limits, err, sizeof err), 0);
	assert_file_is(V2 "cgroup.subtree_control", "+memory\n+pids\n+cpu\n");
	assert_false(is_there(V2 "kart.7.2/memory.max")); /* no limit asked, none written */
	assert_false(is_there(V2 "kart.7.2/pids.max"));
	assert_false(is_there(V2 "kart.7.2/cpu.max"));
	assert_int_equal(cg_leaf_remove(&l2), 0);
	assert_false(is_there(V2 "kart.7.2"));
	assert_int_equal(cg_leaf_remove(&l), 0);
}

static void test_v2_usage_kill_remove(void **state)
{
	(void)state;
	struct cg_usage u;
	v2_host(&h, "cpu memory pids\n");
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &all_limits, err, sizeof err), 0);
	put(V2 "kart.7.1/memory.peak", "67100672\n");
	/* oom, oom_kill and oom_group_kill differ: only oom_kill counts. */
	put(V2 "kart.7.1/memory.events",
	    "low 0\nhigh 0\nmax 311\noom 2\noom_kill 1\noom_group_kill 3\n");
	put(V2 "kart.7.1/cpu.stat", "usage_usec 1051000\nuser_usec 1000999\nsystem_usec 50001\n");
	assert_int_equal(cg_usage_read(&l, &u, NULL), 0);
	assert_int_equal(u.memory_peak, 67100672);
	assert_int_equal(u.oom_kills, 1);
	assert_int_equal(u.cpu_user_us, 1000999);
	assert_int_equal(u.cpu_system_us, 50001);
	assert_int_equal(u.pressure[CG_PSI_CPU_SOME], -1); /* no *.pressure: unknown, not 0 */
	put(V2 "kart.7.1/cpu.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=1500\n"
					"full avg10=0.00 avg60=0.00 avg300=0.00 total=900\n");
	/* An older kernel's memory.pressure with "some" only. */
	put(V2 "kart.7.1/memory.pressure", "some avg10=1.00 avg60=0.50 avg300=0.10 total=77\n");
	put(V2 "kart.7.1/io.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
				       "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
	assert_int_equal(cg_usage_read(&l, &u, NULL), 0);
	assert_true(u.unified);
	assert_int_equal(u.pressure[CG_PSI_CPU_SOME], 1500);
	assert_int_equal(u.pressure[CG_PSI_CPU_FULL], 900);
	assert_int_equal(u.pressure[CG_PSI_MEMORY_SOME], 77);
	assert_int_equal(u.pressure[CG_PSI_MEMORY_FULL], -1);
	assert_int_equal(u.pressure[CG_PSI_IO_SOME], 0); /* measured, and none */
	assert_int_equal(u.pressure[CG_PSI_IO_FULL], 0);

	/* Still populated: the kill reports it after its bound. */
	put(V2 "kart.7.1/cgroup.events", "populated 1\nfrozen 0\n");
	int64_t t0 = now_mono_ms();
	assert_int_equal(cg_leaf_kill(&l, 100), -ETIMEDOUT);
	assert_true(now_mono_ms() - t0 >= 100);
	assert_file_is(V2 "kart.7.1/cgroup.kill", "1\n");
	/* Empty: done at once. */
	put(V2 "kart.7.1/cgroup.events", "populated 0\nfrozen 0\n");
	assert_int_equal(cg_leaf_kill(&l, 1000), 0);
	assert_int_equal(cg_leaf_remove(&l), 0);
	assert_false(is_there(V2 "kart.7.1"));
	assert_int_equal(l.used, 0);
	assert_int_equal(l.mode, CG_MODE_V2); /* what it ran under stays known */
}

static void test_v2_usage_unknown(void **state)
{
	(void)state;
	struct cg_usage u;
	v2_host(&h, "cpu memory pids\n");
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &no_limits, err, sizeof err), 0);
	put(V2 "kart.7.1/memory.peak", "max\n");
	assert_int_equal(cg_usage_read(&l, &u, NULL), 0);
	assert_int_equal(u.memory_peak, -1);
	assert_int_equal(u.oom_kills, -1);
	assert_int_equal(u.cpu_user_us, -1);
	assert_int_equal(u.cpu_system_us, -1);
	assert_int_equal(cg_leaf_remove(&l), 0);
}

/* A limit whose controller is not delegated: refused, nothing left. */
static void test_v2_controller_missing(void **state)
{
	(void)state;
	v2_host(&h, "cpu pids\n");
	struct cg_limits mem = {.memory = 1 << 20};
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &mem, err, sizeof err), -EOPNOTSUPP);
	assert_non_null(strstr(err, "memory"));
	assert_false(is_there(V2 "kart.7.1"));
	/* The others are there. */
	struct cg_limits pc = {.pids = 8, .cpu_milli = 1500};
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.2", &pc, err, sizeof err), 0);
	assert_file_is(V2 "kart.7.2/cpu.max", "150000 100000\n");
	assert_int_equal(cg_leaf_remove(&l), 0);
}

static void test_v2_write_fails(void **state)
{
	(void)state;
	v2_host(&h, "cpu memory pids\n");
	/* pids.max cannot be written (a directory is in its place: as root,
	 * a read-only mode would not stop the write). */
	mkd(V2 "kart.7.1/pids.max");
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &all_limits, err, sizeof err), -EISDIR);
	assert_non_null(strstr(err, "pids.max"));
	assert_int_equal(l.used, 0);
	assert_int_equal(l.mode, CG_MODE_NONE);
	/* memory.max was written before: that leaf is being taken down. */
	assert_false(is_there(V2 "kart.7.1/memory.max"));
}

/* "0::/" is the true root only where there is no cgroup.type: in a
 * cgroup namespace the worker must still move out of its "/". */
static void test_v2_namespace_root(void **state)
{
	(void)state;
	put("cgroup.controllers", "cpu memory pids\n");
	host(&h, "0::/\n", NULL);
	assert_false(h.self_in_parent);
	put("cgroup.type", "domain\n");
	host(&h, "0::/\n", NULL);
	assert_true(h.self_in_parent);
}

/* KART_CGROUP_PARENT: leaves there, the worker does not move. */
static void test_v2_parent_override(void **state)
{
	(void)state;
	v2_tree("cpu memory pids\n");
	mkd("kart.slice");
	put("kart.slice/cgroup.controllers", "memory pids cpu\n");
	put("kart.slice/cgroup.subtree_control", "memory pids cpu\n");
	host(&h, "0::/work.slice/kart.service\n", "/kart.slice");
	assert_false(h.self_in_parent);
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &all_limits, err, sizeof err), 0);
	assert_true(is_there("kart.slice/kart.7.1/memory.max"));
	assert_false(is_there(V2 "kart.worker"));
	assert_file_is("kart.slice/cgroup.subtree_control", "memory pids cpu\n"); /* untouched */
	assert_int_equal(cg_leaf_remove(&l), 0);

	/* A parent that does not exist: refused. */
	host(&h, "0::/work.slice/kart.service\n", "/no/such/parent");
	assert_true(cg_leaf_create(&h, &l, "kart.7.2", &all_limits, err, sizeof err) < 0);
	assert_non_null(strstr(err, "/no/such/parent"));
}

/* ---- v1 / hybrid ---------------------------------------------------------------- */

#define MEMP "memory/process_api/653f/"
static const char self_v1[] = "9:name=systemd:/\n8:pids:/\n6:freezer:/\n"
			      "4:memory:/process_api/653f\n2:cpuacct:/\n1:cpu:/\n0::/\n";

static void v1_tree(bool memsw, bool unified)
{
	mkd("memory/process_api/653f");
	put(MEMP "memory.limit_in_bytes", "9223372036854771712\n");
	if (memsw)
		put(MEMP "memory.memsw.limit_in_bytes", "9223372036854771712\n");
	mkd("pids");
	mkd("cpu");
	mkd("cpuacct");
	mkd("freezer");
	if (unified) {
		mkd("unified");
		put("unified/cgroup.procs", "1\n");
	}
}

/* The worker's host on that tree, as self_v1 places it. */
static void v1_host(struct cg_host *hp, bool memsw, bool unified)
{
	v1_tree(memsw, unified);
	host(hp, self_v1, NULL);
}

static void test_v1_writes(void **state)
{
	(void)state;
	v1_host(&h, true, true);
	assert_int_equal(h.mode, CG_MODE_V1);
	assert_true(h.memsw);
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &all_limits, err, sizeof err), 0);
	assert_int_equal(l.mode, CG_MODE_V1);
	/* Under the worker's own cgroup in each hierarchy. */
	assert_file_is(MEMP "kart.7.1/memory.limit_in_bytes", "67108864\n");
	assert_file_is(MEMP "kart.7.1/memory.memsw.limit_in_bytes", "67108864\n");
	assert_file_is("pids/kart.7.1/pids.max", "32\n");
	assert_file_is("cpu/kart.7.1/cpu.cfs_period_us", "100000\n");
	assert_file_is("cpu/kart.7.1/cpu.cfs_quota_us", "25000\n");
	/* With a unified leaf for kill and cpu.stat, a v1 leaf is made only
	 * where it holds a limit: none in cpuacct or freezer. */
	assert_false(is_there("cpuacct/kart.7.1"));
	assert_false(is_there("freezer/kart.7.1"));
	assert_true(is_there("unified/kart.7.1"));
	assert_false(is_there("memory/kart.7.1"));

	assert_int_equal(cg_join(&l, 31337), 0);
	static const char *const dirs[] = {MEMP, "pids/", "cpu/", "unified/"};
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		char p[256];
		snprintf(p, sizeof p, "%skart.7.1/cgroup.procs", dirs[i]);
		assert_file_is(p, "31337\n");
	}

	/* Usage: memory from v1, cpu from the unified leaf's cpu.stat. */
	struct cg_usage u;
	put(MEMP "kart.7.1/memory.max_usage_in_bytes", "67108864\n");
	put(MEMP "kart.7.1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
	put("unified/kart.7.1/cpu.stat", "usage_usec 300000\nuser_usec 200000\nsystem_usec 100000\n");
	assert_int_equal(cg_usage_read(&l, &u, NULL), 0);
	assert_int_equal(u.memory_peak, 67108864);
	assert_int_equal(u.oom_kills, 3);
	assert_int_equal(u.cpu_user_us, 200000);
	assert_int_equal(u.cpu_system_us, 100000);

	/* The kill goes through the unified leaf's cgroup.kill. */
	put("unified/kart.7.1/cgroup.events", "populated 0\nfrozen 0\n");
	assert_int_equal(cg_leaf_kill(&l, 1000), 0);
	assert_file_is("unified/kart.7.1/cgroup.kill", "1\n");
	assert_false(is_there("freezer/kart.7.1/freezer.state"));
	assert_int_equal(cg_leaf_remove(&l), 0);
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		char p[256];
		snprintf(p, sizeof p, "%skart.7.1", dirs[i]);
		assert_false(is_there(p));
	}
}

/* Plain v1: no memsw, no unified mount. cpu from cpuacct, the kill
 * through the freezer. */
static void test_v1_plain(void **state)
{
	(void)state;
	struct cg_usage u;
	v1_host(&h, false, false);
	assert_false(h.memsw);
	assert_int_equal(h.parent[CG_UNIFIED][0], '\0');
	struct cg_limits mem = {.memory = 1 << 30};
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &mem, err, sizeof err), 0);
	assert_file_is(MEMP "kart.7.1/memory.limit_in_bytes", "1073741824\n");
	assert_false(is_there(MEMP "kart.7.1/memory.memsw.limit_in_bytes"));
	assert_false(is_there("pids/kart.7.1/pids.max"));
	assert_false(is_there("cpu/kart.7.1/cpu.cfs_quota_us"));
	put("cpuacct/kart.7.1/cpuacct.usage_user", "1500000000\n");
	put("cpuacct/kart.7.1/cpuacct.usage_sys", "250000000\n");
	assert_int_equal(cg_usage_read(&l, &u, NULL), 0);
	assert_int_equal(u.cpu_user_us, 1500000);
	assert_int_equal(u.cpu_system_us, 250000);
	assert_int_equal(u.memory_peak, -1);
	assert_int_equal(u.oom_kills, -1);
	assert_int_equal(cg_leaf_kill(&l, 1000), 0);
	assert_file_is("freezer/kart.7.1/freezer.state", "FROZEN\nTHAWED\n");
	assert_int_equal(cg_leaf_remove(&l), 0);
	assert_false(is_there(MEMP "kart.7.1"));
}

/* cpu and cpuacct mounted together (symlinks to "cpu,cpuacct"): one
 * directory, joined once, both read from it. */
static void test_v1_comounted(void **state)
{
	(void)state;
	struct cg_usage u;
	char a[1024], b[1024];
	mkd("cpu,cpuacct");
	mkd("pids");
	snprintf(a, sizeof a, "%s/cpu", root);
	snprintf(b, sizeof b, "%s/cpuacct", root);
	assert_int_equal(symlink("cpu,cpuacct", a), 0);
	assert_int_equal(symlink("cpu,cpuacct", b), 0);
	host(&h, "3:pids:/\n2:cpu,cpuacct:/\n", NULL);
	assert_int_equal(h.alias[CG_CPUACCT], CG_CPU);
	struct cg_limits cpu = {.cpu_milli = 500};
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &cpu, err, sizeof err), 0);
	assert_file_is("cpu,cpuacct/kart.7.1/cpu.cfs_quota_us", "50000\n");
	assert_int_equal(cg_join(&l, 31337), 0);
	assert_file_is("cpu,cpuacct/kart.7.1/cgroup.procs", "31337\n");
	put("cpu,cpuacct/kart.7.1/cpuacct.usage_user", "7000000\n");
	put("cpu,cpuacct/kart.7.1/cpuacct.usage_sys", "3000000\n");
	assert_int_equal(cg_usage_read(&l, &u, NULL), 0);
	assert_int_equal(u.cpu_user_us, 7000);
	assert_int_equal(u.cpu_system_us, 3000);
	assert_int_equal(cg_leaf_remove(&l), 0);
	assert_false(is_there("cpu,cpuacct/kart.7.1"));
}

static void test_v1_write_fails(void **state)
{
	(void)state;
	v1_host(&h, true, true);
	mkd("cpu/kart.7.1/cpu.cfs_quota_us");
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &all_limits, err, sizeof err), -EISDIR);
	assert_non_null(strstr(err, "cpu.cfs_quota_us"));
	/* Every other directory of the leaf is gone again. */
	assert_false(is_there(MEMP "kart.7.1"));
	assert_false(is_there("pids/kart.7.1"));
	assert_false(is_there("unified/kart.7.1"));
	assert_false(is_there("freezer/kart.7.1"));
}

/* A hierarchy a limit needs is missing: refused; one it does not need
 * is missing: the leaf is made without it. */
static void test_v1_hierarchy_missing(void **state)
{
	(void)state;
	mkd("memory/process_api/653f");
	host(&h, self_v1, NULL);
	struct cg_limits pids = {.pids = 10};
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &pids, err, sizeof err), -ENODEV);
	assert_non_null(strstr(err, "pids"));
	assert_false(is_there(MEMP "kart.7.1"));
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.2", &no_limits, err, sizeof err), 0);
	assert_true(is_there(MEMP "kart.7.2"));
	assert_int_equal(cg_leaf_remove(&l), 0);

	/* KART_CGROUP_PARENT that does not exist. */
	host(&h, self_v1, "/no/such/parent");
	struct cg_limits mem = {.memory = 1 << 20};
	assert_true(cg_leaf_create(&h, &l, "kart.7.3", &mem, err, sizeof err) < 0);
	assert_non_null(strstr(err, "no/such/parent"));
}

/* Leaves of dead workers go; those of live ones, and anything not a
 * task leaf, stay. */
static void test_sweep_stale(void **state)
{
	(void)state;
	char own[64];
	int n = -1;
	v1_host(&h, false, true);
	mkd("pids/kart.2147483646.1"); /* no such pid, ever */
	put("pids/kart.2147483646.1/pids.max", "32\n");
	mkd("unified/kart.2147483646.1");
	put("unified/kart.2147483646.1/cgroup.events", "populated 0\n");
	mkd(MEMP "kart.2147483646.9");
	mkd("pids/kart.1.1"); /* pid 1 lives */
	snprintf(own, sizeof own, "pids/kart.%d.3", (int)getpid());
	mkd(own);
	mkd("pids/kart.2147483646.x");
	mkd("pids/kart.worker");
	mkd("pids/elsewhere");
	assert_int_equal(cg_sweep(&h, &n), 0);
	assert_int_equal(n, 3);
	assert_false(is_there("pids/kart.2147483646.1"));
	assert_false(is_there("unified/kart.2147483646.1"));
	assert_false(is_there(MEMP "kart.2147483646.9"));
	assert_true(is_there("pids/kart.1.1"));
	assert_true(is_there(own));
	assert_true(is_there("pids/kart.2147483646.x"));
	assert_true(is_there("pids/kart.worker"));
	assert_true(is_there("pids/elsewhere"));
}

/* The worker's loop does not wait: kill, then look (cgroup.events is
 * what it watches), then remove without retrying. */
static void test_v2_kill_in_steps(void **state)
{
	(void)state;
	char ev[CG_PATH_MAX + 32], want[CG_PATH_MAX + 64];
	v2_host(&h, "cpu memory pids\n");
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.2", &no_limits, err, sizeof err), 0);
	assert_int_equal(cg_leaf_events(&l, ev, sizeof ev), -ENOENT); /* no file: poll */
	put(V2 "kart.7.2/cgroup.events", "populated 1\nfrozen 0\n");
	assert_int_equal(cg_leaf_events(&l, ev, sizeof ev), 0);
	snprintf(want, sizeof want, "%s/" V2 "kart.7.2/cgroup.events", root);
	assert_string_equal(ev, want);
	int64_t t0 = now_mono_ms();
	assert_int_equal(cg_leaf_kill_start(&l), 1); /* cgroup.kill: once is enough */
	assert_true(now_mono_ms() - t0 < 50);
	assert_file_is(V2 "kart.7.2/cgroup.kill", "1\n");
	assert_true(cg_leaf_populated(&l, NULL));
	put(V2 "kart.7.2/cgroup.events", "populated 0\nfrozen 0\n");
	assert_false(cg_leaf_populated(&l, NULL));
	assert_int_equal(cg_leaf_remove_nowait(&l), 0);
	assert_false(is_there(V2 "kart.7.2"));
	assert_false(cg_leaf_populated(&l, NULL)); /* nothing left to look at */
}

/* v1 without a unified tree: no cgroup.kill (freeze and kill, to be sent
 * again), no cgroup.events (the process lists say it). */
static void test_v1_kill_in_steps(void **state)
{
	(void)state;
	char ev[CG_PATH_MAX + 32];
	v1_host(&h, false, false);
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.3", &no_limits, err, sizeof err), 0);
	assert_int_equal(cg_leaf_events(&l, ev, sizeof ev), -ENOENT);
	put("pids/kart.7.3/cgroup.procs", "2147483646\n");
	assert_int_equal(cg_leaf_kill_start(&l), 0);
	assert_file_is("freezer/kart.7.3/freezer.state", "FROZEN\nTHAWED\n");
	assert_true(cg_leaf_populated(&l, NULL));
	put("pids/kart.7.3/cgroup.procs", "");
	assert_false(cg_leaf_populated(&l, NULL));
	assert_int_equal(cg_leaf_remove_nowait(&l), 0);
	assert_false(is_there("pids/kart.7.3"));
}

/* kart pause: cgroup.freeze of the unified leaf, written 1 then 0; on v1
 * without a unified tree, the freezer's state; with neither, -ENODEV
 * (the worker then stops the processes by signal). */
static void test_freeze(void **state)
{
	(void)state;
	v2_host(&h, "cpu memory pids\n");
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.4", &no_limits, err, sizeof err), 0);
	assert_int_equal(cg_leaf_freeze(&l, true), 0);
	assert_int_equal(cg_leaf_freeze(&l, false), 0);
	assert_file_is(V2 "kart.7.4/cgroup.freeze", "1\n0\n");
	struct cg_leaf none = {.mode = CG_MODE_NONE};
	assert_int_equal(cg_leaf_freeze(&none, true), -ENODEV);
}

static void test_freeze_v1(void **state)
{
	(void)state;
	v1_host(&h, false, false);
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.5", &no_limits, err, sizeof err), 0);
	assert_int_equal(cg_leaf_freeze(&l, true), 0);
	assert_int_equal(cg_leaf_freeze(&l, false), 0);
	assert_file_is("freezer/kart.7.5/freezer.state", "FROZEN\nTHAWED\n");
}

/* A worker that is a zombie (killed, not yet reaped) is gone: its leaf
 * goes. Recovery runs at that very moment. */
static void test_sweep_zombie(void **state)
{
	(void)state;
	char leaf[64];
	int n = -1;
	pid_t z = fork();
	assert_true(z >= 0);
	if (z == 0)
		_exit(0);
	/* A zombie once it has exited; not reaped until the end. */
	char st[64];
	snprintf(st, sizeof st, "/proc/%d/stat", (int)z);
	for (int i = 0; i < 200; i++) {
		_cleanup_free_ char *t = NULL;
		if (read_file_at(AT_FDCWD, st, 4096, &t, NULL) == 0 && strstr(t, ") Z "))
			break;
		usleep(5000);
	}
	v1_host(&h, false, true);
	snprintf(leaf, sizeof leaf, "pids/kart.%d.1", (int)z);
	mkd(leaf);
	assert_int_equal(cg_sweep(&h, &n), 0);
	assert_int_equal(n, 1);
	assert_false(is_there(leaf));
	assert_int_equal(waitpid(z, NULL, 0), z);
}

static void test_no_cgroupfs(void **state)
{
	(void)state;
	host(&h, "0::/\n", NULL);
	assert_int_equal(h.mode, CG_MODE_NONE);
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &no_limits, err, sizeof err), -ENODEV);
	assert_int_equal(cg_leaf_create(&h, &l, "../x", &no_limits, err, sizeof err), -EINVAL);
	assert_string_equal(cg_mode_name(CG_MODE_V1), "v1");
	assert_string_equal(cg_mode_name(CG_MODE_V2), "v2");
	assert_string_equal(cg_mode_name(CG_MODE_NONE), "none");
}

/* ---- the join step of run_spawn_join ------------------------------------------ */

struct joinrec {
	char marker[1100];
	bool marker_seen; /* the program had run when the join step ran */
	pid_t pid;
	int fail;
};

static int join_probe(pid_t pid, void *arg)
{
	struct joinrec *j = arg;
	struct stat st;
	j->pid = pid;
	usleep(100 * 1000); /* time enough to run, if it were not held */
	j->marker_seen = stat(j->marker, &st) == 0;
	return j->fail;
}

static void spawn_touch(struct joinrec *j, int expect)
{
	char name[] = "task", p[1100];
	snprintf(p, sizeof p, "%s/%s", root, name);
	put(name, "");
	/* Above the fds the child sets up (0-4), as in the worker. */
	int wdir0 = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int wdir = fcntl(wdir0, F_DUPFD_CLOEXEC, 20);
	close(wdir0);
	int out = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* never written */
	snprintf(j->marker, sizeof j->marker, "%s/ran", root);
	char *argv[] = {"/bin/sh", "-c", "exec touch \"$0\"", j->marker, NULL};
	char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	struct run r;
	struct run_join join = {.fn = join_probe, .arg = j};
	struct run_req q = RUN_REQ_INIT;
	q.argv = argv;
	q.envp = envp;
	q.wdir = wdir;
	q.name = name;
	q.out_file = q.err_file = out;
	q.join = &join;
	int rc = run_spawn_join(&r, &q);
	assert_int_equal(rc, expect);
	assert_true(j->pid > 0);
	assert_false(j->marker_seen); /* held until the join step was done */
	if (rc == 0) {
		int st;
		assert_int_equal(waitpid(r.pid, &st, 0), r.pid);
		run_close(&r);
	} else {
		assert_int_equal(join.err, j->fail);
		/* Killed and reaped: no such child any more. */
		assert_int_equal(waitpid(j->pid, NULL, WNOHANG), -1);
	}
	close(wdir);
	close(out);
}

static void test_join_before_exec(void **state)
{
	(void)state;
	struct joinrec j = {0};
	spawn_touch(&j, 0);
	assert_true(is_there("ran")); /* and it did run after */
}

static void test_join_fails_never_runs(void **state)
{
	(void)state;
	struct joinrec j = {.fail = -EACCES};
	spawn_touch(&j, -ECANCELED);
	usleep(100 * 1000);
	assert_false(is_there("ran"));
}

/* The child joins v1 leaves itself: "0" into each descriptor, before
 * its exec; fn is never called. Only where it shares our memory (x86-64:
 * spawn_vm); elsewhere fn joins it after a fork. */
static void spawn_self(int selffd, int expect, int *jerr)
{
	char name[] = "task", p[1100];
	snprintf(p, sizeof p, "%s/%s", root, name);
	put(name, "");
	int wdir0 = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int wdir = fcntl(wdir0, F_DUPFD_CLOEXEC, 20);
	close(wdir0);
	int out = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct joinrec j = {0};
	snprintf(j.marker, sizeof j.marker, "%s/ran", root);
	char *argv[] = {"/bin/sh", "-c", "exec touch \"$0\"", j.marker, NULL};
	char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	struct run r;
	int fds[] = {selffd};
	struct run_join join = {.fn = join_probe, .arg = &j, .cgroup_fd = -1, .born_is_enough = true,
				.self_fds = fds, .nself = 1};
	struct run_req q = RUN_REQ_INIT;
	q.argv = argv;
	q.envp = envp;
	q.wdir = wdir;
	q.name = name;
	q.out_file = q.err_file = out;
	q.join = &join;
	assert_int_equal(run_spawn_join(&r, &q), expect);
	assert_int_equal(j.pid, 0); /* fn was never called */
	if (expect == 0) {
		int st;
		assert_int_equal(waitpid(r.pid, &st, 0), r.pid);
		run_close(&r);
	}
	*jerr = join.err;
	close(wdir);
	close(out);
}

static void test_self_join_before_exec(void **state)
{
	(void)state;
#ifndef __x86_64__
	skip();
#endif
	int pp[2], jerr;
	assert_int_equal(pipe2(pp, O_CLOEXEC), 0);
	spawn_self(pp[1], 0, &jerr);
	char buf[8];
	assert_int_equal(read(pp[0], buf, sizeof buf), 1);
	assert_int_equal(buf[0], '0');
	assert_true(is_there("ran"));
	close(pp[0]);
	close(pp[1]);
}

static void test_self_join_fails_never_runs(void **state)
{
	(void)state;
#ifndef __x86_64__
	skip();
#endif
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC), jerr = 0; /* refuses the write */
	spawn_self(fd, -ECANCELED, &jerr);
	assert_int_equal(jerr, -EBADF);
	usleep(100 * 1000);
	assert_false(is_there("ran"));
	close(fd);
}

/* A leaf made for some limits, fitted to others: only the values that
 * differ are written; a limit that goes is written "max" (v2) or -1
 * (v1); a hierarchy it lacks is made. */
static void test_v1_fit(void **state)
{
	(void)state;
	v1_host(&h, true, true);
	struct cg_limits a = {.memory = 64ull << 20, .pids = 32, .memory_peak = true};
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &a, err, sizeof err), 0);
	struct cg_limits b = {.memory = 128ull << 20, .pids = 32, .cpu_milli = 500, .memory_peak = true};
	assert_int_equal(cg_leaf_fit(&h, &l, "kart.7.2", &b, err, sizeof err), 0);
	assert_file_is(MEMP "kart.7.1/memory.limit_in_bytes", "67108864\n134217728\n");
	assert_file_is(MEMP "kart.7.1/memory.memsw.limit_in_bytes", "67108864\n134217728\n");
	assert_file_is("pids/kart.7.1/pids.max", "32\n"); /* the same: not written */
	assert_file_is("cpu/kart.7.2/cpu.cfs_quota_us", "50000\n"); /* made for it */
	struct cg_limits c = {.memory_peak = true};
	assert_int_equal(cg_leaf_fit(&h, &l, "kart.7.3", &c, err, sizeof err), 0);
	assert_file_is(MEMP "kart.7.1/memory.limit_in_bytes", "67108864\n134217728\n-1\n");
	assert_file_is("pids/kart.7.1/pids.max", "32\nmax\n");
	assert_file_is("cpu/kart.7.2/cpu.cfs_quota_us", "50000\n-1\n");
	assert_int_equal(cg_leaf_fit(&h, &l, "kart.7.4", &c, err, sizeof err), 0); /* nothing to do */
	assert_file_is("pids/kart.7.1/pids.max", "32\nmax\n");
	assert_int_equal(cg_leaf_remove(&l), 0);
	assert_false(is_there("cpu/kart.7.2"));
}

static void test_v2_fit(void **state)
{
	(void)state;
	v2_host(&h, "cpu memory pids\n");
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &all_limits, err, sizeof err), 0);
	struct cg_limits b = {.memory = 32ull << 20, .pids = 32};
	assert_int_equal(cg_leaf_fit(&h, &l, "kart.7.9", &b, err, sizeof err), 0);
	assert_file_is(V2 "kart.7.1/memory.max", "67108864\n33554432\n");
	assert_file_is(V2 "kart.7.1/memory.swap.max", "0\n"); /* still limited */
	assert_file_is(V2 "kart.7.1/pids.max", "32\n");
	assert_file_is(V2 "kart.7.1/cpu.max", "25000 100000\nmax 100000\n");
	assert_int_equal(cg_leaf_fit(&h, &l, "kart.7.9", &no_limits, err, sizeof err), 0);
	assert_file_is(V2 "kart.7.1/memory.max", "67108864\n33554432\nmax\n");
	assert_file_is(V2 "kart.7.1/memory.swap.max", "0\nmax\n");
	assert_file_is(V2 "kart.7.1/memory.oom.group", "1\n0\n");
	assert_file_is(V2 "kart.7.1/pids.max", "32\nmax\n");
	assert_false(is_there(V2 "kart.7.9"));
	assert_int_equal(cg_leaf_remove(&l), 0);
}

/* Renewed for the next run: the peak reset, the counters of the run
 * taken as the next one's base; a pids leaf whose peak is above 1
 * replaced; refused where the run left memory, or held an OOM kill. */
static void test_v1_renew(void **state)
{
	(void)state;
	struct cg_usage u;
	struct cg_files f;
	cg_files_init(&f);
	v1_host(&h, true, true);
	struct cg_limits a = {.memory = 64ull << 20, .pids = 32, .memory_peak = true};
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &a, err, sizeof err), 0);
	put(MEMP "kart.7.1/memory.max_usage_in_bytes", "50000000\n");
	put(MEMP "kart.7.1/memory.failcnt", "3\n");
	put(MEMP "kart.7.1/memory.usage_in_bytes", "4096\n");
	put(MEMP "kart.7.1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
	put("pids/kart.7.1/pids.peak", "9\n");
	put("unified/kart.7.1/cpu.stat", "usage_usec 300000\nuser_usec 200000\nsystem_usec 100000\n");
	put("unified/kart.7.1/cpu.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=5000\n"
					     "full avg10=0.00 avg60=0.00 avg300=0.00 total=4000\n");
	assert_int_equal(cg_usage_read(&l, &u, &f), 0);
	assert_int_equal(u.pids_peak, 9);
	assert_int_equal(u.pressure[CG_PSI_CPU_SOME], 5000);
	assert_int_equal(u.pressure[CG_PSI_IO_SOME], -1); /* no io.pressure: unknown */
	assert_int_equal(u.cpu_user_us, 200000);
	assert_true(cg_leaf_reusable(&l));
	assert_int_equal(cg_leaf_renew(&h, &l, &f, "kart.7.2"), 0);
	assert_file_is(MEMP "kart.7.1/memory.max_usage_in_bytes", "50000000\n0\n");
	assert_file_is(MEMP "kart.7.1/memory.failcnt", "3\n0\n");
	assert_false(is_there("pids/kart.7.1"));
	assert_file_is("pids/kart.7.2/pids.max", "32\n");
	/* The next run: its own share of the CPU. */
	put("unified/kart.7.1/cpu.stat", "usage_usec 350000\nuser_usec 230000\nsystem_usec 120000\n");
	put("unified/kart.7.1/cpu.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=5700\n"
					     "full avg10=0.00 avg60=0.00 avg300=0.00 total=4000\n");
	put("unified/kart.7.1/io.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=900\n"
					    "full avg10=0.00 avg60=0.00 avg300=0.00 total=800\n");
	put("pids/kart.7.2/pids.peak", "1\n");
	put(MEMP "kart.7.1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
	cg_files_close(&f); /* read afresh: the fake tree's files were rewritten */
	assert_int_equal(cg_usage_read(&l, &u, &f), 0);
	assert_int_equal(u.cpu_user_us, 30000);
	assert_int_equal(u.cpu_system_us, 20000);
	/* Stall time too: the run's own; a total unknown at the last
	 * run's end is no base (unknown, not the leaf's whole total). */
	assert_int_equal(u.pressure[CG_PSI_CPU_SOME], 700);
	assert_int_equal(u.pressure[CG_PSI_CPU_FULL], 0);
	assert_int_equal(u.pressure[CG_PSI_IO_SOME], -1);
	assert_int_equal(u.pids_peak, 1);
	assert_int_equal(u.oom_kills, 1);
	/* It held an OOM kill: never again. */
	assert_false(cg_leaf_reusable(&l));
	assert_int_equal(cg_leaf_renew(&h, &l, &f, "kart.7.3"), -ESTALE);
	cg_files_close(&f);
	assert_int_equal(cg_leaf_remove(&l), 0);
}

/* v2: the peak reset through the descriptor the next reading uses; a
 * leaf whose pids.peak is above 1 is not renewed (no reset for it). */
static void test_v2_renew(void **state)
{
	(void)state;
	struct cg_usage u;
	struct cg_files f;
	cg_files_init(&f);
	v2_host(&h, "cpu memory pids\n");
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &all_limits, err, sizeof err), 0);
	put(V2 "kart.7.1/memory.peak", "67100672\n");
	put(V2 "kart.7.1/memory.current", "8192\n");
	put(V2 "kart.7.1/memory.events", "oom 0\noom_kill 0\n");
	put(V2 "kart.7.1/pids.peak", "1\n");
	put(V2 "kart.7.1/cpu.stat", "usage_usec 3\nuser_usec 2\nsystem_usec 1\n");
	assert_int_equal(cg_usage_read(&l, &u, &f), 0);
	assert_int_equal(u.memory_peak, 67100672);
	assert_int_equal(cg_leaf_renew(&h, &l, &f, "kart.7.2"), 0);
	char *pk = get(V2 "kart.7.1/memory.peak"); /* (written at 0: a plain file) */
	assert_non_null(pk);
	assert_int_equal(strncmp(pk, "reset\n", 6), 0);
	free(pk);
	assert_true(f.peak >= 0); /* kept: the next reading goes through it */
	put(V2 "kart.7.1/pids.peak", "5\n");
	cg_files_close(&f);
	assert_int_equal(cg_usage_read(&l, &u, &f), 0);
	assert_int_equal(u.pids_peak, 5);
	assert_int_equal(cg_leaf_renew(&h, &l, &f, "kart.7.3"), -ESTALE);
	cg_files_close(&f);
	assert_int_equal(cg_leaf_remove(&l), 0);
}

static void test_v1_renew_refused(void **state)
{
	(void)state;
	struct cg_usage u;
	struct cg_files f;
	cg_files_init(&f);
	v1_host(&h, true, true);
	struct cg_limits a = {.memory = 64ull << 20, .memory_peak = true};
	assert_int_equal(cg_leaf_create(&h, &l, "kart.7.1", &a, err, sizeof err), 0);
	put(MEMP "kart.7.1/memory.max_usage_in_bytes", "50000000\n");
	put(MEMP "kart.7.1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
	put("unified/kart.7.1/cpu.stat", "usage_usec 3\nuser_usec 2\nsystem_usec 1\n");
	/* What the run left charged to it: more than the kernel's batches;
	 * it may yet go (a grace period), so: later. */
	put(MEMP "kart.7.1/memory.usage_in_bytes", "1073741824\n");
	assert_int_equal(cg_usage_read(&l, &u, &f), 0);
	assert_int_equal(cg_leaf_renew(&h, &l, &f, "kart.7.2"), -EAGAIN);
	put(MEMP "kart.7.1/memory.usage_in_bytes", "0\n");
	/* Sent a kill: never again (CLONE_INTO_CGROUP, cgroup.h). */
	put("unified/kart.7.1/cgroup.events", "populated 0\nfrozen 0\n");
	assert_int_equal(cg_leaf_kill(&l, 1000), 0);
	assert_int_equal(cg_leaf_renew(&h, &l, &f, "kart.7.2"), -ESTALE);
	cg_files_close(&f);
	assert_int_equal(cg_leaf_remove(&l), 0);
}

int main(void)
{
	/* As in the worker: a write to a closed pipe is EPIPE, not death. */
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_memory_events),
		cmocka_unit_test(test_parse_cpu_stat),
		cmocka_unit_test(test_parse_oom_control),
		cmocka_unit_test(test_parse_peak),
		cmocka_unit_test(test_parse_pressure),
		cmocka_unit_test(test_parse_ctls),
		cmocka_unit_test_setup_teardown(test_v2_writes, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v2_usage_kill_remove, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v2_usage_unknown, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v2_controller_missing, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v2_write_fails, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v2_namespace_root, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v2_parent_override, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v1_writes, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v1_plain, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v1_comounted, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v1_write_fails, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v1_hierarchy_missing, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_sweep_stale, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v2_kill_in_steps, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v1_kill_in_steps, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_freeze, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_freeze_v1, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_sweep_zombie, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_no_cgroupfs, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_join_before_exec, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_join_fails_never_runs, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_self_join_before_exec, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_self_join_fails_never_runs, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v1_fit, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v2_fit, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v1_renew, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v1_renew_refused, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_v2_renew, tree_setup, tree_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
