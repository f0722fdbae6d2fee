/* atomic_file.c: the file side of the safetensors and .npy code.  Reading is pread() at
 * known offsets of a file whose size was taken once at open, so the parsers can check every
 * length against it.  Writing goes to a temporary file in the destination's folder that is
 * fsync()ed and then rename()d over the final name, so a crash or a failed save never
 * leaves a half-written file under that name (a failed save leaves the old file as it was).
 */
#include "serialize_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dp_read_at(int fd, void *buf, size_t n, off_t offset)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, offset);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) { errno = 0; return -1; }
        p += r; n -= (size_t)r; offset += r;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w; n -= (size_t)w;
    }
    return 0;
}

int dp_open_for_reading(const char *kind, const char *path, int64_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dp_error("cannot open %s file '%s': %s", kind, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return dp_error("cannot read %s file '%s': %s", kind, path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return dp_error("cannot read %s file '%s': it is a directory", kind, path);
    }
    *size = (int64_t)st.st_size;
    return fd;
}

int dp_out_open(dp_out_file *f, const char *kind, const char *path)
{
    static unsigned counter;
    f->fd = -1; f->tmp = NULL; f->path = path;
    size_t n = strlen(path) + 64;
    f->tmp = malloc(n);
    if (!f->tmp) return dp_error("out of memory writing %s file '%s'", kind, path);
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned c = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
        snprintf(f->tmp, n, "%s.tmp%ld.%u", path, (long)getpid(), c);
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd >= 0) return 0;
        if (errno != EEXIST) break;
    }
    int e = errno;
    free(f->tmp); f->tmp = NULL;
    return dp_error("cannot write %s file '%s': %s", kind, path, strerror(e));
}

void dp_out_abandon(dp_out_file *f)
{
    if (f->fd >= 0) close(f->fd);
    if (f->tmp) { unlink(f->tmp); free(f->tmp); }
    f->fd = -1; f->tmp = NULL;
}

int dp_out_write(dp_out_file *f, const char *kind, const void *buf, size_t n)
{
    if (write_all(f->fd, buf, n) != 0) {
        int e = errno;
        dp_out_abandon(f);
        return dp_error("cannot write %s file '%s': %s", kind, f->path, strerror(e));
    }
    return 0;
}

int dp_out_commit(dp_out_file *f, const char *kind)
{
    if (fsync(f->fd) != 0 && errno != EINVAL && errno != EROFS) {
        int e = errno;
        dp_out_abandon(f);
        return dp_error("cannot write %s file '%s': %s", kind, f->path, strerror(e));
    }
    if (close(f->fd) != 0) {
        int e = errno;
        f->fd = -1;
        dp_out_abandon(f);
        return dp_error("cannot write %s file '%s': %s", kind, f->path, strerror(e));
    }
    f->fd = -1;
    if (rename(f->tmp, f->path) != 0) {
        int e = errno;
        dp_out_abandon(f);
        return dp_error("cannot write %s file '%s': %s", kind, f->path, strerror(e));
    }
    free(f->tmp); f->tmp = NULL;
    return 0;
}

int dp_out_write_tensor(dp_out_file *f, const char *kind, dp_tensor *t)
{
    int64_t n = dp_numel(t);
    size_t bytes = (size_t)n * dp_dtype_size(t->dtype);
    if (bytes == 0) return 0;
    if (t->device.type == DP_DEVICE_CPU && dp_is_contiguous(t))
        return dp_out_write(f, kind, dp_data(t), bytes);
    void *buf = malloc(bytes);
    if (!buf) {
        dp_out_abandon(f);
        return dp_error("out of memory writing %s file '%s' (%zu bytes)", kind, f->path, bytes);
    }
    if (dp_to_host(t, buf, t->dtype, n) != 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", dp_last_error());
        free(buf);
        dp_out_abandon(f);
        return dp_error("cannot write %s file '%s': %s", kind, f->path, msg);
    }
    int rc = dp_out_write(f, kind, buf, bytes);
    free(buf);
    return rc;
}
