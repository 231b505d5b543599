/* A preload library for the escape suite: its constructor appends one line
 * to $AGENTRT_MARKER naming the process it was loaded into (argv[0] and
 * argv[1]), so a test can tell whether it ran in the sandbox helper or only
 * in the tool. Built with clang -shared -fPIC by the test. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void agentrt_marker(void) {
  const char *path = getenv("AGENTRT_MARKER");
  if (!path) return;
  char cmd[512];
  int fd = open("/proc/self/cmdline", O_RDONLY);
  if (fd < 0) return;
  ssize_t n = read(fd, cmd, sizeof cmd - 2);
  close(fd);
  if (n <= 0) return;
  cmd[n] = 0;
  /* argv[0] NUL argv[1]: print both, separated by a space. */
  size_t a0 = strlen(cmd);
  const char *a1 = (size_t)n > a0 + 1 ? cmd + a0 + 1 : "";
  int out = open(path, O_WRONLY | O_APPEND | O_CREAT, 0666);
  if (out < 0) return;
  char line[600];
  size_t k = 0;
  for (const char *p = cmd; *p && k < 280; p++) line[k++] = *p;
  line[k++] = ' ';
  for (const char *p = a1; *p && k < 580; p++) line[k++] = *p;
  line[k++] = '\n';
  (void)!write(out, line, k);
  close(out);
}
