// An LD_PRELOAD library that makes the disk fail under one directory, on
// demand, while the process runs: the failing-disk tests start a real server
// with it and switch failures on and off from outside.
//
//   LINSERVE_FAIL_DIR      the directory whose files fail (absolute, canonical)
//   LINSERVE_FAIL_CONTROL  a file; while it exists, its first line says which
//                          calls fail and with which errno, e.g.
//                          "write ENOSPC", "fsync EIO", "rename,fsync EIO"
//                          (calls: write pwrite writev fsync fdatasync rename
//                          or all; errnos: EIO ENOSPC EDQUOT EROFS)
//
// A call fails only when it touches a file under LINSERVE_FAIL_DIR (for the
// fd calls: the file the descriptor is open on); every other call goes to
// the C library untouched.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

// Whether `path` is LINSERVE_FAIL_DIR or lies under it.
static int UnderFailDir(const char* path) {
  const char* dir = getenv("LINSERVE_FAIL_DIR");
  if (dir == NULL || *dir == '\0' || path == NULL) return 0;
  const size_t n = strlen(dir);
  return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static int FdUnderFailDir(int fd) {
  char link[64], path[4096];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof(path) - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  return UnderFailDir(path);
}

// The errno that `call` fails with now, or 0 when it goes through. Reads the
// control file with raw system calls: a stdio FILE could call back in here.
static int FailureFor(const char* call) {
  const char* control = getenv("LINSERVE_FAIL_CONTROL");
  if (control == NULL) return 0;
  const int fd = open(control, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char line[256];
  const ssize_t n = read(fd, line, sizeof(line) - 1);
  close(fd);
  if (n <= 0) return 0;
  line[n] = '\0';
  char calls[200], error[32];
  if (sscanf(line, "%199s %31s", calls, error) != 2) return 0;
  int listed = strcmp(calls, "all") == 0;
  for (char* save = NULL, *name = strtok_r(calls, ",", &save); name != NULL && !listed;
       name = strtok_r(NULL, ",", &save)) {
    listed = strcmp(name, call) == 0;
  }
  if (!listed) return 0;
  if (strcmp(error, "ENOSPC") == 0) return ENOSPC;
  if (strcmp(error, "EDQUOT") == 0) return EDQUOT;
  if (strcmp(error, "EROFS") == 0) return EROFS;
  return EIO;
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void* buffer, size_t count) {
  const int error = FailureFor("write");
  if (error != 0 && FdUnderFailDir(fd)) {
    errno = error;
    return -1;
  }
  return NEXT(write)(fd, buffer, count);
}

ssize_t pwrite(int fd, const void* buffer, size_t count, off_t offset) {
  const int error = FailureFor("pwrite");
  if (error != 0 && FdUnderFailDir(fd)) {
    errno = error;
    return -1;
  }
  return NEXT(pwrite)(fd, buffer, count, offset);
}

ssize_t pwrite64(int fd, const void* buffer, size_t count, off64_t offset) {
  const int error = FailureFor("pwrite");
  if (error != 0 && FdUnderFailDir(fd)) {
    errno = error;
    return -1;
  }
  return NEXT(pwrite64)(fd, buffer, count, offset);
}

ssize_t writev(int fd, const struct iovec* iov, int count) {
  const int error = FailureFor("writev");
  if (error != 0 && FdUnderFailDir(fd)) {
    errno = error;
    return -1;
  }
  return NEXT(writev)(fd, iov, count);
}

int fsync(int fd) {
  const int error = FailureFor("fsync");
  if (error != 0 && FdUnderFailDir(fd)) {
    errno = error;
    return -1;
  }
  return NEXT(fsync)(fd);
}

int fdatasync(int fd) {
  const int error = FailureFor("fdatasync");
  if (error != 0 && FdUnderFailDir(fd)) {
    errno = error;
    return -1;
  }
  return NEXT(fdatasync)(fd);
}

int rename(const char* from, const char* to) {
  const int error = FailureFor("rename");
  if (error != 0 && (UnderFailDir(from) || UnderFailDir(to))) {
    errno = error;
    return -1;
  }
  return NEXT(rename)(from, to);
}
