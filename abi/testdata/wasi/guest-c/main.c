// The reference C guest of the WASI vectors: a wasi-libc program, without
// the agentrt SDK, that uses what C programs use of WASI (libc's start-up,
// arguments, environment, both clocks, a sleep, randomness, the standard
// streams, a file it cannot open, an exit status).
// host/wasi_trace_test.go records the WASI calls it makes as
// ../trace.guest-c.txt.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
	printf("argc %d argv[0] %s HOME %s\n", argc, argv[0], getenv("HOME") ? "set" : "unset");
	struct timespec rt, mono, pause = {0, 1500000};
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	nanosleep(&pause, NULL);
	printf("realtime %lld.%09ld monotonic %lld.%09ld\n", (long long)rt.tv_sec, rt.tv_nsec, (long long)mono.tv_sec, mono.tv_nsec);
	unsigned char r[8];
	if (getentropy(r, sizeof r) != 0)
		return 1;
	printf("entropy %02x%02x%02x%02x%02x%02x%02x%02x\n", r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
	char buf[16];
	printf("read %zd\n", read(0, buf, sizeof buf));
	int fd = open("/etc/hostname", O_RDONLY);
	printf("open %d %s\n", fd, fd < 0 ? strerror(errno) : "opened");
	fflush(stdout);
	fprintf(stderr, "to stderr\n");
	return 3;
}
