/* fill DIR TOTAL_MIB FILE_MIB: write TOTAL_MIB MiB of non-zero bytes into
 * DIR/f0, DIR/f1, ..., FILE_MIB MiB each, saying "wrote N" every 16 MiB and,
 * when a write fails, "wrote N ERRNO" (then it stops, exit 1).
 * fill -sparse PATH SIZE_MIB: make PATH a hole of SIZE_MIB MiB (ftruncate),
 * saying "sparse ok" or "sparse ERRNO".
 * A C program, so that it runs under small RLIMIT_AS and RLIMIT_FSIZE. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *errname(int e) {
  switch (e) {
  case ENOSPC: return "ENOSPC";
  case EFBIG: return "EFBIG";
  case EDQUOT: return "EDQUOT";
  case EACCES: return "EACCES";
  default: return strerror(e);
  }
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  /* Past RLIMIT_FSIZE a write fails with EFBIG: say so rather than die. */
  signal(SIGXFSZ, SIG_IGN);
  if (argc == 4 && strcmp(argv[1], "-sparse") == 0) {
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)atoll(argv[3]) << 20) != 0) {
      printf("sparse %s\n", errname(errno));
      return 1;
    }
    printf("sparse ok\n");
    return 0;
  }
  if (argc != 4) return 2;
  long total = atol(argv[2]), per = atol(argv[3]);
  static char buf[1 << 20];
  memset(buf, 'x', sizeof buf);
  long n = 0;
  for (int f = 0; n < total; f++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/f%d", argv[1], f);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
      printf("wrote %ld %s\n", n, errname(errno));
      return 1;
    }
    for (long i = 0; i < per && n < total; i++) {
      if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) {
        printf("wrote %ld %s\n", n, errname(errno));
        return 1;
      }
      if (++n % 16 == 0) printf("wrote %ld\n", n);
    }
    close(fd);
  }
  printf("done %ld\n", n);
  return 0;
}
