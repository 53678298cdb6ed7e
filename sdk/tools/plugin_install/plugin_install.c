/* gpustack-plugin-install: copies a plugin delivered as a container image into the node daemon's
 * plugin directory, the way the host's loader will trust it. A plugin image holds this static
 * binary as its entrypoint and the plugin's files (the .so, its manifest .json, and anything the
 * manifest's library needs) in one directory; the chart runs the image as an init container with
 * the plugin directory mounted:
 *
 *   gpustack-plugin-install [--from /plugin] --to /var/lib/gpustack/plugins.d
 *
 * Every regular file of --from is written beside its final name, synced, then renamed into place,
 * so the daemon never sees half a library. The loader refuses a file or directory that anyone but
 * root (or its own user) could replace, so files get mode 0644 (0755 for shared libraries), the
 * target directory 0755, and, when run as root, root ownership. Static and dependency-free: a
 * plugin image needs no shell and no C library of its own. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int is_shared_library(const char *name) {
  return ends_with(name, ".so") || strstr(name, ".so.") != NULL;
}

static int fail(const char *what, const char *path) {
  fprintf(stderr, "gpustack-plugin-install: %s %s: %s\n", what, path, strerror(errno));
  return 1;
}

/* Makes the directory the loader will trust: mode 0755, owned by root when we are root. */
static int prepare_target(const char *to) {
  if (mkdir(to, 0755) != 0 && errno != EEXIST) return fail("cannot create", to);
  if (chmod(to, 0755) != 0) return fail("cannot set the mode of", to);
  if (geteuid() == 0 && chown(to, 0, 0) != 0) return fail("cannot give root", to);
  return 0;
}

static int copy_one(const char *from_dir, const char *to_dir, const char *name) {
  char src[4096], tmp[4096], dst[4096];
  if (snprintf(src, sizeof src, "%s/%s", from_dir, name) >= (int)sizeof src ||
      snprintf(tmp, sizeof tmp, "%s/.%s.partial", to_dir, name) >= (int)sizeof tmp ||
      snprintf(dst, sizeof dst, "%s/%s", to_dir, name) >= (int)sizeof dst) {
    fprintf(stderr, "gpustack-plugin-install: path too long: %s\n", name);
    return 1;
  }
  int in = open(src, O_RDONLY | O_CLOEXEC);
  if (in < 0) return fail("cannot read", src);
  int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (out < 0) {
    close(in);
    return fail("cannot write", tmp);
  }
  char buffer[1 << 16];
  ssize_t n;
  int status = 0;
  while ((n = read(in, buffer, sizeof buffer)) > 0) {
    for (ssize_t done = 0; done < n;) {
      ssize_t w = write(out, buffer + done, (size_t)(n - done));
      if (w < 0) {
        status = fail("cannot write", tmp);
        break;
      }
      done += w;
    }
    if (status != 0) break;
  }
  if (n < 0) status = fail("cannot read", src);
  mode_t mode = is_shared_library(name) ? 0755 : 0644;
  if (status == 0 && fchmod(out, mode) != 0) status = fail("cannot set the mode of", tmp);
  if (status == 0 && geteuid() == 0 && fchown(out, 0, 0) != 0) status = fail("cannot give root", tmp);
  if (status == 0 && fsync(out) != 0) status = fail("cannot sync", tmp);
  close(in);
  if (close(out) != 0 && status == 0) status = fail("cannot close", tmp);
  if (status == 0 && rename(tmp, dst) != 0) status = fail("cannot rename into place", dst);
  if (status != 0) unlink(tmp);
  else printf("installed %s (mode %04o)\n", dst, (unsigned)mode);
  return status;
}

int main(int argc, char **argv) {
  const char *from = "/plugin", *to = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--from") == 0 && i + 1 < argc) {
      from = argv[++i];
    } else if (strcmp(argv[i], "--to") == 0 && i + 1 < argc) {
      to = argv[++i];
    } else {
      fprintf(stderr, "usage: gpustack-plugin-install [--from DIR] --to DIR\n");
      return 2;
    }
  }
  if (to == NULL) {
    fprintf(stderr, "usage: gpustack-plugin-install [--from DIR] --to DIR\n");
    return 2;
  }
  DIR *dir = opendir(from);
  if (dir == NULL) return fail("cannot open", from) + 1;
  /* An image without a manifest is the wrong image: refuse it before writing anything. */
  int manifests = 0;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    if (entry->d_name[0] != '.' && ends_with(entry->d_name, ".json")) ++manifests;
  }
  if (manifests == 0) {
    fprintf(stderr, "gpustack-plugin-install: %s holds no plugin manifest (*.json)\n", from);
    closedir(dir);
    return 2;
  }
  rewinddir(dir);
  if (prepare_target(to) != 0) {
    closedir(dir);
    return 1;
  }
  int status = 0;
  while ((entry = readdir(dir)) != NULL) {
    if (entry->d_name[0] == '.') continue;
    char src[4096];
    struct stat info;
    snprintf(src, sizeof src, "%s/%s", from, entry->d_name);
    if (stat(src, &info) != 0 || !S_ISREG(info.st_mode)) continue;
    if (copy_one(from, to, entry->d_name) != 0) status = 1;
  }
  closedir(dir);
  return status;
}
