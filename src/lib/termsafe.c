/* termsafe.c - see termsafe.h. */
#include "termsafe.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char hex[] = "0123456789abcdef";

/* A code point a terminal (or a reader's eye) acts on although it is no
 * ASCII control: C1 (NEL and CSI among them), the Arabic letter mark,
 * LRM/RLM, the line and paragraph separators, the embeddings and
 * overrides, the isolates. */
static bool unsafe_cp(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
	       (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* The code point of a valid sequence of n bytes (utf8_char's). */
static uint32_t decode(const unsigned char *p, size_t n)
{
	static const unsigned char lead[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
	uint32_t cp = p[0] & lead[n];
	for (size_t k = 1; k < n; k++)
		cp = (cp << 6) | (p[k] & 0x3f);
	return cp;
}

static char *put_u(char *o, uint32_t cp)
{
	*o++ = '\\';
	*o++ = 'u';
	for (int sh = 12; sh >= 0; sh -= 4)
		*o++ = hex[(cp >> sh) & 15];
	return o;
}

ssize_t term_escape(char *out, size_t cap, const char *str, size_t len, const char *also)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t o = 0;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_char((const char *)s + i, len - i);
		char esc[8];
		size_t el = 0;
		if (n == 0 || s[i] < 0x20 || s[i] == 0x7f) {
			n = 1; /* a control, or a byte of no valid sequence */
			esc[el++] = '\\';
			if (s[i] == '\n') {
				esc[el++] = 'n';
			} else {
				esc[el++] = 'x';
				esc[el++] = hex[s[i] >> 4];
				esc[el++] = hex[s[i] & 15];
			}
		} else if (n > 1 && unsafe_cp(decode(s + i, n))) {
			el = (size_t)(put_u(esc, decode(s + i, n)) - esc);
		} else if (n == 1 && also && strchr(also, s[i])) {
			esc[el++] = '\\';
			esc[el++] = (char)s[i];
		}
		const char *from = el ? esc : (const char *)s + i;
		size_t fl = el ? el : n;
		if (o + fl >= cap)
			return -ENOSPC;
		memcpy(out + o, from, fl);
		o += fl;
		i += n;
	}
	if (o >= cap)
		return -ENOSPC;
	out[o] = '\0';
	return (ssize_t)o;
}

char *term_safe(const char *s)
{
	if (!s)
		s = "";
	size_t len = strlen(s), cap = TERM_ESC_GROWTH * len + 1;
	char *out = xmalloc(cap);
	(void)term_escape(out, cap, s, len, NULL);
	return out;
}

char *json_dumps_safe(const json_t *j, size_t flags)
{
	char *d = json_dumps(j, flags);
	if (!d)
		return NULL;
	/* jansson writes valid UTF-8 and escapes what JSON requires (C0,
	 * '"', '\\'); what is left to escape sits inside strings, where
	 * \uHHHH means the same character. A \u escape of 6 bytes stands
	 * for at least 1 byte (DEL). */
	size_t len = strlen(d);
	char *out = xmalloc(6 * len + 1), *o = out;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_char(d + i, len - i);
		uint32_t cp = n ? decode((const unsigned char *)d + i, n) : 0xfffd;
		if (n == 0 || cp == 0x7f || unsafe_cp(cp)) {
			o = put_u(o, cp);
			i += n ? n : 1;
		} else {
			memcpy(o, d + i, n);
			o += n;
			i += n;
		}
	}
	*o = '\0';
	free(d);
	return out;
}
