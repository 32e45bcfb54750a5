/* result.c - the result document, written with jansson. */
#define _GNU_SOURCE
#include "result.h"

#include <jansson.h>

#include "task.h"
#include "util.h"

const char *const usage_family_name[UF__N] = {
	[UF_CPU] = "cpu", [UF_MEMORY] = "memory", [UF_IO] = "io", [UF_PIDS] = "pids",
	[UF_PRESSURE] = "pressure",
};

void result_init(struct result *r)
{
	memset(r, 0, sizeof *r);
	r->exit_code = -1;
	r->timeout_s = -1;
	r->kill_grace_s = -1;
	r->cpu_user_ms = r->cpu_system_ms = r->memory_peak = -1;
	r->io_read_bytes = r->io_write_bytes = r->pids_peak = -1;
	for (int i = 0; i < PSI__N; i++)
		r->psi_us[i] = -1;
	r->attempt = 1;
	r->backend = "none";
	r->landlock = "off";
	r->cgroup = "none";
	r->uid = (uid_t)-1;
}

/* Length of the valid UTF-8 sequence at s, or 0 if invalid. */
static json_t *jstr(const char *s)
{
	if (!s)
		return json_null();
	_cleanup_free_ char *clean = utf8_sanitize(s, strlen(s));
	return json_string(clean);
}

static json_t *utf8_json(const char *s, size_t len)
{
	_cleanup_free_ char *clean = utf8_sanitize(s, len);
	return json_string(clean);
}

static json_t *jtime(int64_t ms)
{
	char buf[32];
	if (ms <= 0)
		return json_null();
	fmt_rfc3339_ms(ms, buf);
	return json_string(buf);
}

static json_t *jint_or_null(int64_t v, bool is_null) { return is_null ? json_null() : json_integer(v); }

static json_t *jstream(const struct result_stream *s)
{
	/* Always an object (contract §3), so readers can index it blindly;
	 * a task that never ran has no file: path null, 0 bytes. */
	if (!s->present)
		return json_pack("{s:n, s:i, s:b}", "path", "bytes", 0, "truncated", 0);
	json_t *o = json_pack("{s:o, s:I, s:b}", "path", jstr(s->path), "bytes",
			      (json_int_t)s->bytes, "truncated", s->truncated);
	/* Only where the disk lost some: a reader may tell a cut by
	 * output= from a loss, and every other result keeps its shape. */
	if (o && s->lost_bytes)
		json_object_set_new(o, "lost_bytes", json_integer((json_int_t)s->lost_bytes));
	return o;
}

static json_t *jcount(int64_t v) { return jint_or_null(v, v < 0); }

/* {"FAMILY": "text", ...} of the families that have one; NULL: none. */
static json_t *jfamilies(const char *const *text)
{
	json_t *o = NULL;
	for (int i = 0; i < UF__N; i++) {
		if (!text[i])
			continue;
		if (!o)
			o = json_object();
		json_object_set_new(o, usage_family_name[i], json_string(text[i]));
	}
	return o;
}

static json_t *jusage(const struct result *r)
{
	static const char *const psi[PSI__N] = {
		[PSI_CPU_SOME] = "psi_cpu_some_us", [PSI_CPU_FULL] = "psi_cpu_full_us",
		[PSI_MEMORY_SOME] = "psi_memory_some_us", [PSI_MEMORY_FULL] = "psi_memory_full_us",
		[PSI_IO_SOME] = "psi_io_some_us", [PSI_IO_FULL] = "psi_io_full_us",
	};
	json_t *u = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "cpu_user_ms", jcount(r->cpu_user_ms),
			      "cpu_system_ms", jcount(r->cpu_system_ms), "memory_peak_bytes",
			      jcount(r->memory_peak), "io_read_bytes", jcount(r->io_read_bytes),
			      "io_write_bytes", jcount(r->io_write_bytes), "pids_peak",
			      jcount(r->pids_peak));
	for (int i = 0; i < PSI__N; i++)
		json_object_set_new(u, psi[i], jcount(r->psi_us[i]));
	/* Only of a run: a task that never ran used nothing, and says why. */
	json_t *by = r->started_ms > 0 ? jfamilies(r->usage_by) : NULL;
	json_t *why = r->started_ms > 0 ? jfamilies(r->usage_why) : NULL;
	if (by)
		json_object_set_new(u, "measured_by", by);
	if (why)
		json_object_set_new(u, "why_null", why);
	return u;
}

/* To a hundredth of a percent: seff's precision, not the float's. */
static double round4(double x) { return (double)(int64_t)(x * 10000 + 0.5) / 10000; }

/* As Slurm's seff: CPU time over the run time (less the time paused)
 * times the CPUs it could use (its cpu= limit, else the worker's, at
 * most the worker's); the memory peak over the memory limit applied.
 * null where a figure is missing, and why. Never ran: null. */
static json_t *jefficiency(const struct result *r)
{
	if (r->started_ms <= 0 || r->finished_ms <= 0)
		return json_null();
	double cpus = r->cpu_milli ? r->cpu_milli / 1000.0 : r->host_cpus;
	if (r->host_cpus > 0 && cpus > r->host_cpus)
		cpus = r->host_cpus;
	int64_t run = r->finished_ms - r->started_ms - r->paused_ms;
	json_t *cpu, *mem, *why = json_object();
	if (r->cpu_user_ms < 0 || r->cpu_system_ms < 0) {
		cpu = json_null();
		json_object_set_new(why, "cpu", json_string("its CPU time was not measured (usage.why_null)"));
	} else if (run <= 0 || cpus <= 0) {
		cpu = json_null();
		json_object_set_new(why, "cpu", json_string(run <= 0 ? "it ran for no measurable time"
								      : "the worker's CPUs are not known"));
	} else
		cpu = json_real(round4((double)(r->cpu_user_ms + r->cpu_system_ms) / ((double)run * cpus)));
	if (!r->memory) {
		mem = json_null();
		json_object_set_new(why, "memory", json_string("no memory limit (memory=)"));
	} else if (r->memory_peak < 0) {
		mem = json_null();
		json_object_set_new(why, "memory", json_string("its memory peak was not measured (usage.why_null)"));
	} else
		mem = json_real(round4((double)r->memory_peak / (double)r->memory));
	json_t *e = json_pack("{s:o, s:o, s:o}", "cpu", cpu, "memory", mem, "cpus",
			      cpus > 0 ? json_real(cpus) : json_null());
	if (json_object_size(why))
		json_object_set_new(e, "why_null", why);
	else
		json_decref(why);
	return e;
}

char *result_dumps(const struct result *r)
{
	json_t *o = json_object();
	json_object_set_new(o, "id", jstr(r->id));
	json_object_set_new(o, "name", jstr(r->name));
	if (r->name && !utf8_valid(r->name, strlen(r->name))) {
		/* The exact bytes, for a name that is not valid UTF-8. */
		size_t l = strlen(r->name);
		_cleanup_free_ char *hex = xmalloc(l * 2 + 1);
		for (size_t i = 0; i < l; i++)
			snprintf(hex + 2 * i, 3, "%02x", (unsigned char)r->name[i]);
		json_object_set_new(o, "name_hex", json_string(hex));
	}
	if (r->kind)
		json_object_set_new(o, "kind", json_string(r->kind));
	json_object_set_new(o, "status", jstr(r->status));
	json_object_set_new(o, "exit_code", jint_or_null(r->exit_code, r->exit_code < 0));
	json_object_set_new(o, "signal", r->signal ? json_string(signal_name(r->signal)) : json_null());
	json_object_set_new(o, "error", jstr(r->error));
	json_object_set_new(o, "label", jstr(r->label));
	json_object_set_new(o, "refusal", jstr(r->refusal));
	json_object_set_new(o, "worker", jstr(r->worker));
	json_object_set_new(o, "lane", jstr(r->lane));
	json_object_set_new(o, "attempt", json_integer(r->attempt));
	json_object_set_new(o, "submitted_at", jtime(r->submitted_ms));
	json_object_set_new(o, "started_at", jtime(r->started_ms));
	json_object_set_new(o, "finished_at", jtime(r->finished_ms));
	json_object_set_new(o, "wait_ms",
			    jint_or_null(r->started_ms - r->submitted_ms,
					 r->started_ms <= 0 || r->submitted_ms <= 0));
	json_object_set_new(o, "duration_ms",
			    jint_or_null(r->finished_ms - r->started_ms,
					 r->started_ms <= 0 || r->finished_ms <= 0));
	json_object_set_new(o, "paused_ms", jint_or_null(r->paused_ms, r->started_ms <= 0));
	json_object_set_new(o, "stdout", jstream(&r->out));
	json_object_set_new(o, "stderr", jstream(&r->err));
	json_object_set_new(o, "task", r->task_path ? json_pack("{s:o}", "path", jstr(r->task_path))
						     : json_null());
	json_t *art = r->artifacts_dropped
			      ? json_pack("{s:n, s:I, s:b}", "path", "bytes",
					  (json_int_t)r->artifacts_bytes, "truncated", 1)
		      : r->artifacts_path
			      ? json_pack("{s:o, s:I, s:b}", "path", jstr(r->artifacts_path), "bytes",
					  (json_int_t)r->artifacts_bytes, "truncated", r->artifacts_lost > 0)
			      : json_null();
	if (json_is_object(art) && r->artifacts_files)
		json_object_set_new(art, "files", json_integer((json_int_t)r->artifacts_files));
	if (json_is_object(art) && r->artifacts_lost)
		json_object_set_new(art, "lost_files", json_integer((json_int_t)r->artifacts_lost));
	json_object_set_new(o, "artifacts", art);
	json_t *cpu = r->cpu_milli ? json_real(r->cpu_milli / 1000.0) : json_null();
	json_object_set_new(o, "limits",
			    json_pack("{s:o, s:o, s:o, s:o, s:o}", "timeout_s",
				      jint_or_null(r->timeout_s, r->timeout_s < 0), "kill_grace_s",
				      jint_or_null(r->kill_grace_s, r->kill_grace_s < 0), "memory_bytes",
				      jint_or_null((int64_t)r->memory, r->memory == 0), "pids",
				      jint_or_null(r->pids, r->pids == 0), "cpu", cpu));
	json_object_set_new(o, "usage", jusage(r));
	json_object_set_new(o, "efficiency", jefficiency(r));
	json_t *ll;
	char *endp;
	long abi = r->landlock ? strtol(r->landlock, &endp, 10) : 0;
	if (r->landlock && *r->landlock && *endp == '\0')
		ll = json_integer(abi);
	else
		ll = jstr(r->landlock ? r->landlock : "off");
	json_object_set_new(o, "sandbox",
			    json_pack("{s:o, s:b, s:o, s:b, s:o}", "backend", jstr(r->backend),
				      "network", r->network, "landlock", ll, "seccomp", r->seccomp,
				      "cgroup", jstr(r->cgroup)));
	json_object_set_new(o, "submitter",
			    json_pack("{s:o, s:o}", "uid",
				      jint_or_null((int64_t)r->uid, r->uid == (uid_t)-1), "user",
				      jstr(r->user)));
	if (r->task) {
		const struct task_spec *t = r->task;
		json_t *binds = json_array(), *env = json_array();
		for (int i = 0; i < t->n_binds; i++)
			json_array_append_new(binds, json_pack("{s:o, s:s}", "path",
							      jstr(t->binds[i].path), "mode",
							      t->binds[i].mode == BIND_RO ? "ro" : "rw"));
		/* Names only: a value may be a secret of the submitter's. */
		for (const char *e = NULL; (e = task_env_next(t, e));)
			json_array_append_new(env, utf8_json(e, (size_t)(strchr(e, '=') - e)));
		json_object_set_new(o, "cwd", t->cwd >= 0 ? jstr(t->binds[t->cwd].path) : json_null());
		json_object_set_new(o, "binds", binds);
		json_object_set_new(o, "env", env);
		/* Their values leave done/ID.task once this is written. */
		if (t->n_env)
			json_object_set_new(o, "env_values_removed", json_true());
		json_object_set_new(o, "home", jstr(r->home));
		json_object_set_new(o, "work_discarded", json_boolean(r->work_discarded));
	}
	if (r->engine_json && r->engine_key) {
		json_t *e = json_loads(r->engine_json, 0, NULL);
		if (e)
			json_object_set_new(o, r->engine_key, e);
	}
	if (r->attempts_json) {
		json_t *a = json_loads(r->attempts_json, 0, NULL);
		json_object_set_new(o, "attempts", a ? a : json_null());
	}
	/* Ten digits: 0.0612, not 0.061199999999999997. */
	char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
	json_decref(o);
	if (!s)
		oom();
	size_t l = strlen(s);
	char *out = xmalloc(l + 2);
	memcpy(out, s, l);
	out[l] = '\n';
	out[l + 1] = '\0';
	free(s);
	return out;
}
