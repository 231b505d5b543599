/* hoard MIB PLACE...: hold MIB MiB of memory in each PLACE (a file path,
 * or "memfd"), written in 1 MiB blocks of non-zero bytes and kept open, so
 * every page is memory the tool holds. Each 16 MiB is said on stdout
 * ("PLACE N") before the next, so a tool killed half-way has said how far it
 * got; a failure ends the place with "PLACE N ERRNO"; the end is "held".
 * A C program, not a Go one: under a 256 MiB RLIMIT_AS the Go runtime does
 * not start. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *errname(int e) {
  switch (e) {
  case ENOSPC: return "ENOSPC";
  case ENOMEM: return "ENOMEM";
  case EROFS: return "EROFS";
  case EACCES: return "EACCES";
  case EFBIG: return "EFBIG";
  case ENOENT: return "ENOENT";
  default: return strerror(e);
  }
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int mib = atoi(argv[1]);
  static char buf[1 << 20];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (char)(i | 1);
  setvbuf(stdout, NULL, _IONBF, 0);
  for (int a = 2; a < argc; a++) {
    const char *where = argv[a];
    int fd = strcmp(where, "memfd") == 0 ? memfd_create("hoard", 0) : open(where, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
      printf("%s 0 %s\n", where, errname(errno));
      continue;
    }
    int n = 0;
    while (n < mib) {
      ssize_t w = write(fd, buf, sizeof buf);
      if (w != (ssize_t)sizeof buf) {
        printf("%s %d %s\n", where, n, w < 0 ? errname(errno) : "short write");
        break;
      }
      if (++n % 16 == 0) printf("%s %d\n", where, n);
    }
  }
  printf("held\n");
  return 0;
}
