/* bench/stamp: the latency tasks' interpreter (#!DIR/stamp). Its first
 * instruction reads CLOCK_REALTIME; it prints that time in ns and exits.
 * Built -static when libc.a is there, so no dynamic loader runs first. */
#include <time.h>
#include <unistd.h>

int main(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	unsigned long long ns = (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
	char buf[32], *p = buf + sizeof buf;
	*--p = '\n';
	do
		*--p = (char)('0' + ns % 10);
	while (ns /= 10);
	return write(1, p, (size_t)(buf + sizeof buf - p)) < 0;
}
