/* termsafe.h - strings made safe for a terminal. A task's name, label,
 * error, a drop directory's name: anything a member of a shared spool
 * chose may hold ESC sequences, C1 controls (U+009B is CSI), bidi
 * overrides or bytes that are not UTF-8. Printed as they are, they
 * clear root's screen, retitle the window or forge lines. Everything
 * kart prints that it did not write itself goes through here. */
#ifndef KART_TERMSAFE_H
#define KART_TERMSAFE_H

#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

/* The most bytes one input byte becomes (\xHH). */
#define TERM_ESC_GROWTH 4

/* s (len bytes) into out (cap bytes, its NUL included) with every byte
 * or code point a terminal may act on written as an escape: \n, \xHH
 * for the other C0 controls, DEL, NUL and each byte that is not part of
 * valid UTF-8, \uHHHH for the C1 controls (U+0080-009F), the bidi marks,
 * embeddings, overrides and isolates (U+061C, U+200E/F, U+202A-202E,
 * U+2066-2069) and the line and paragraph separators (U+2028/9); each
 * character of `also` (e.g. "\\" or "\"\\") gets a backslash before it.
 * Everything else, other Unicode included, is kept. The length written,
 * or -ENOSPC when out is too small (cap >= TERM_ESC_GROWTH * len + 1
 * always is). The output is as long as s exactly when nothing in s
 * needed an escape. */
ssize_t term_escape(char *out, size_t cap, const char *s, size_t len, const char *also);

/* The one to print a name with: a new string (caller frees), s as
 * term_escape writes it. A name with nothing a terminal acts on prints
 * as it is (a backslash too: scripts read the ids kart prints); one
 * that needed escapes shows them. NULL gives "". */
char *term_safe(const char *s);

/* json_dumps, and then every code point above that JSON leaves as it is
 * (DEL, the C1 controls, the bidi controls, U+2028/9) written as a
 * \uHHHH escape: the same JSON value, valid JSON, and no control a
 * terminal would act on. NULL when json_dumps fails; caller frees. */
char *json_dumps_safe(const json_t *j, size_t flags);

#endif
