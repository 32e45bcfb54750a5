/* sched.c - times and retry rules (sched.h). */
#define _GNU_SOURCE
#include "sched.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "util.h"

/* Exactly n digits at s. */
static int digits(const char *s, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

static bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static int mdays(int y, int m)
{
	static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	return m == 2 && leap(y) ? 29 : d[m - 1];
}

int sched_parse_rfc3339(const char *s, int64_t *ms)
{
	int Y, M, D, h, m, sec, oh = 0, om = 0, sign = 0;
	int64_t frac = 0;
	/* YYYY-MM-DDTHH:MM:SS */
	if (strlen(s) < 20 || digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) ||
	    s[7] != '-' || digits(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
	    digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &m) || s[16] != ':' ||
	    digits(s + 17, 2, &sec))
		return -EINVAL;
	const char *p = s + 19;
	if (*p == '.') {
		int n = 0;
		for (p++; isdigit((unsigned char)*p); p++, n++)
			if (n < 3)
				frac = frac * 10 + (*p - '0');
		if (n == 0)
			return -EINVAL;
		for (; n < 3; n++)
			frac *= 10;
	}
	if ((*p == 'Z' || *p == 'z') && p[1] == '\0') {
		sign = 0;
	} else if ((*p == '+' || *p == '-') && strlen(p) == 6 && !digits(p + 1, 2, &oh) &&
		   p[3] == ':' && !digits(p + 4, 2, &om)) {
		sign = *p == '+' ? 1 : -1;
		if (oh > 23 || om > 59)
			return -ERANGE;
	} else {
		return -EINVAL;
	}
	/* A leap second is read as the second before it. */
	if (Y < 1970 || M < 1 || M > 12 || D < 1 || D > mdays(Y, M) || h > 23 || m > 59 ||
	    sec > 60)
		return -ERANGE;
	if (sec == 60)
		sec = 59;
	struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D,
			.tm_hour = h, .tm_min = m, .tm_sec = sec};
	time_t t = timegm(&tm);
	int64_t v = (int64_t)t * 1000 + frac - (int64_t)sign * (oh * 3600 + om * 60) * 1000;
	if (v < 0)
		return -ERANGE;
	*ms = v;
	return 0;
}

int sched_parse_hhmm(const char *s, int64_t now_ms, int64_t *ms)
{
	int h, m;
	if (strlen(s) != 5 || digits(s, 2, &h) || s[2] != ':' || digits(s + 3, 2, &m) || h > 23 ||
	    m > 59)
		return -EINVAL;
	time_t now = (time_t)(now_ms / 1000);
	struct tm tm;
	if (!localtime_r(&now, &tm))
		return -EINVAL;
	/* mktime with tm_isdst -1 finds the offset that time has: a day
	 * with a clock change in it is still today's HH:MM. */
	for (int day = 0; day < 3; day++) {
		struct tm t = tm;
		t.tm_mday += day;
		t.tm_hour = h;
		t.tm_min = m;
		t.tm_sec = 0;
		t.tm_isdst = -1;
		time_t at = mktime(&t);
		if (at == (time_t)-1)
			return -EINVAL;
		if ((int64_t)at * 1000 > now_ms) {
			*ms = (int64_t)at * 1000;
			return 0;
		}
	}
	return -EINVAL;
}

int sched_parse_at(const char *s, int64_t now_ms, int64_t *ms)
{
	if (strlen(s) == 5)
		return sched_parse_hhmm(s, now_ms, ms);
	return sched_parse_rfc3339(s, ms);
}

int sched_parse_retry_on(const char *s, struct retry_on *out, const char **why)
{
	memset(out, 0, sizeof *out);
	char buf[512];
	if (strlen(s) >= sizeof buf)
		return *why = "too long", -1;
	snprintf(buf, sizeof buf, "%s", s);
	for (char *rest = buf, *it; (it = strsep(&rest, ","));) {
		long long v;
		if (!*it)
			return *why = "an empty item", -1;
		if (strcmp(it, "failed") == 0)
			out->mask |= RETRY_FAILED;
		else if (strcmp(it, "timeout") == 0)
			out->mask |= RETRY_TIMEOUT;
		else if (strcmp(it, "oom") == 0)
			out->mask |= RETRY_OOM;
		else if (strncmp(it, "exit=", 5) == 0) {
			if (parse_int(it + 5, 1, 255, &v) < 0)
				return *why = "exit=N takes an exit status from 1 to 255", -1;
			if (out->nexits == RETRY_EXITS_MAX)
				return *why = "more than 16 exit=N", -1;
			out->exits[out->nexits++] = (int)v;
		} else {
			return *why = "not one of failed, timeout, oom, exit=N", -1;
		}
	}
	if (!sched_retry_set(out))
		return *why = "names no outcome", -1;
	return 0;
}

bool sched_retry_matches(const struct retry_on *r, const char *status, int exit_code)
{
	if (strcmp(status, "failed") == 0) {
		if (r->mask & RETRY_FAILED)
			return true;
		for (int i = 0; i < r->nexits; i++)
			if (r->exits[i] == exit_code)
				return true;
		return false;
	}
	if (strcmp(status, "timeout") == 0)
		return r->mask & RETRY_TIMEOUT;
	if (strcmp(status, "oom") == 0)
		return r->mask & RETRY_OOM;
	return false;
}

bool sched_retry_due(const struct retry_on *r, const char *status, int exit_code, int attempt,
		     int retries)
{
	return sched_retry_set(r) && attempt <= retries && sched_retry_matches(r, status, exit_code);
}

int64_t sched_retry_delay_ms(int64_t base_ms, int next)
{
	if (base_ms <= 0)
		return 0;
	int64_t d = base_ms;
	for (int k = 2; k < next && d < RETRY_DELAY_CAP_MS; k++)
		d *= 2;
	return d < RETRY_DELAY_CAP_MS ? d : RETRY_DELAY_CAP_MS;
}
