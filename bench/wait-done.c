/* bench/wait-done DIR N: wait, without polling, until DIR (a spool's
 * done/) holds N results (names ending in .json, not starting with a
 * dot). Prints "ready" once its inotify watch is in place, then the
 * CLOCK_REALTIME (seconds, ns precision) at which the N-th was seen.
 * It sleeps in read(2) or between reads, and never polls the directory. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

/* Reads are NAP_NS apart while more than NAP_UNTIL_LEFT results are to come. */
#define NAP_NS 2000000
#define NAP_UNTIL_LEFT 64

static int is_result(const char *s)
{
	size_t n = strlen(s);
	return s[0] != '.' && n > 5 && strcmp(s + n - 5, ".json") == 0;
}

static long count(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	long n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += is_result(e->d_name);
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s DIR N\n", argv[0]);
		return 2;
	}
	long want = strtol(argv[2], NULL, 10);
	int in = inotify_init1(IN_CLOEXEC);
	if (in < 0 || inotify_add_watch(in, argv[1], IN_CREATE | IN_MOVED_TO) < 0) {
		fprintf(stderr, "wait-done: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	/* Events can count a name twice (created, then renamed over, or seen
	 * by the first readdir too), never miss one: a readdir decides. */
	long have = count(argv[1]), events = 0;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	while (have < want) {
		ssize_t len = read(in, buf, sizeof buf);
		if (len < 0) {
			if (errno == EINTR)
				continue;
			perror("wait-done: read");
			return 1;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		for (char *p = buf; p < buf + len;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			if (ev->mask & IN_Q_OVERFLOW)
				events = want; /* lost events: recount */
			else if (ev->len && is_result(ev->name))
				events++;
			p += sizeof *ev + ev->len;
		}
		/* Far from the end, let events gather before the next read:
		 * each result makes four or five (its .task, .stdout and
		 * .stderr links, its JSON), and a wake-up for each cost this
		 * process about 12 us of CPU and the worker as many
		 * preemptions per task. Near the end every read is at once,
		 * so the time of the last result stays exact. */
		if (have + events < want - NAP_UNTIL_LEFT) {
			struct timespec nap = {0, NAP_NS};
			nanosleep(&nap, NULL);
		}
		if (have + events >= want) {
			have = count(argv[1]);
			events = 0;
		}
	}
	printf("%lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
	return 0;
}
