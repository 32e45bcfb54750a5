/* log.h - the worker's log lines (logfmt, JSON or plain text on stderr)
 * and the systemd notification protocol (sd_notify without libsystemd). */
#ifndef KART_LOG_H
#define KART_LOG_H

#include <stdbool.h>
#include <stdint.h>

/* Logging for long-running commands: "kart[worker]: ..." on stderr. */
void log_set_prog(const char *prog);
void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* When set (logfmt or JSON), logmsg() and die() hand it the bare
 * message instead of writing "prog: message". */
extern void (*log_sink)(const char *level, const char *msg);
_Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

enum log_format { LOG_TEXT, LOG_LOGFMT, LOG_JSON };

/* "text", "logfmt" or "json"; -EINVAL otherwise. */
int log_format_parse(const char *s, enum log_format *out);
/* From now on every logmsg() and die() line, and every task event, is
 * written in this format; `worker` is added to each line. */
void log_setup(enum log_format f, const char *worker);

/* One line per task event: event=claimed|started|finished.
 * status, error: NULL to leave out; duration_ms < 0: left out. */
void log_task(const char *event, const char *id, const char *status, int64_t duration_ms,
	      const char *error);

/* sd_notify. NOTIFY_SOCKET names a unix datagram socket (a path, or
 * "@name" in the abstract namespace); each message is one datagram of
 * newline-separated KEY=VALUE lines: READY=1 once the worker serves,
 * STATUS=free text, STOPPING=1 at shutdown, WATCHDOG=1 at least every
 * WATCHDOG_USEC/2 when the unit sets WatchdogSec=. Without NOTIFY_SOCKET
 * everything here does nothing. Returns 1 if sent, 0 if no socket,
 * -errno on failure. */
int notify_send(const char *msg);
int notify_statusf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A timerfd that fires at half the watchdog interval (WATCHDOG_USEC, for
 * this pid per WATCHDOG_PID), or -1 when no watchdog is asked for. The
 * event loop reads it and calls notify_watchdog(). */
int notify_watchdog_fd(void);
void notify_watchdog(int tfd);

#endif
