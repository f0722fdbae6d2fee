/* atomic_file.c: the file side of the safetensors and .npy code.  Reading is pread() at
 * known offsets of a file whose size was taken once at open, so the parsers can check every
 * length against it.  Writing goes to a temporary file in the destination's folder that is
 * fsync()ed and then rename()d over the final name, so a crash or a failed save never
 * leaves a half-written file under that name (a failed save leaves the old file as it was).
 * A save through a symbolic link writes the file the link points to, and a save onto
 * anything but a regular file (a FIFO, a device node, a directory) is refused.
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

static const char *file_type_name(mode_t mode)
{
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "an unknown kind of file";
}

/* The target of the symbolic link name, malloc'd; NULL with errno set on failure.  size is
 * the link's st_size: its length on most file systems, but 0 on some (procfs). */
static char *read_link(const char *name, off_t size)
{
    size_t cap = size > 0 ? (size_t)size + 1 : 256;
    char *buf = NULL;
    for (;;) {
        char *grown = realloc(buf, cap);
        if (!grown) { free(buf); errno = ENOMEM; return NULL; }
        buf = grown;
        ssize_t len = readlink(name, buf, cap);
        if (len < 0) { int e = errno; free(buf); errno = e; return NULL; }
        if ((size_t)len < cap) { buf[len] = 0; return buf; }
        cap *= 2;   /* the link changed since lstat, or its size was not known */
    }
}

/* The name a save must replace: path itself when nothing or a regular file is there, the
 * file at the end of the chain when path is a symbolic link (renaming over the link would
 * replace the link, not the file it points to).  Anything else there, a FIFO or a device
 * node (/dev/full) or a directory, is refused: renaming over it would replace the node.
 * Returns a malloc'd name, or NULL with the error set. */
static char *save_target(const char *kind, const char *path)
{
    char *cur = strdup(path);
    if (!cur) { dp_error("out of memory writing %s file '%s'", kind, path); return NULL; }
    for (int hops = 0;; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0) {
            if (errno == ENOENT) return cur;   /* a new file; a missing folder shows at open */
            dp_error("cannot write %s file '%s': %s", kind, path, strerror(errno));
            break;
        }
        if (S_ISREG(st.st_mode)) return cur;
        if (!S_ISLNK(st.st_mode)) {
            if (strcmp(cur, path) == 0)
                dp_error("cannot write %s file '%s': it is %s, not a regular file", kind, path,
                         file_type_name(st.st_mode));
            else
                dp_error("cannot write %s file '%s': it is a symbolic link to '%s', which is %s, not a "
                         "regular file", kind, path, cur, file_type_name(st.st_mode));
            break;
        }
        if (hops == 40) {
            dp_error("cannot write %s file '%s': %s", kind, path, strerror(ELOOP));
            break;
        }
        char *link = read_link(cur, st.st_size);
        if (!link) {
            dp_error("cannot write %s file '%s': %s", kind, path, strerror(errno));
            break;
        }
        size_t len = strlen(link);
        /* A relative target is relative to the folder that holds the link. */
        const char *slash = strrchr(cur, '/');
        if (link[0] != '/' && slash) {
            size_t dir = (size_t)(slash - cur) + 1;
            char *joined = malloc(dir + len + 1);
            if (!joined) {
                free(link);
                dp_error("out of memory writing %s file '%s'", kind, path);
                break;
            }
            memcpy(joined, cur, dir);
            memcpy(joined + dir, link, len + 1);
            free(link);
            link = joined;
        }
        free(cur);
        cur = link;
    }
    free(cur);
    return NULL;
}

int dp_out_open(dp_out_file *f, const char *kind, const char *path)
{
    static unsigned counter;
    f->fd = -1; f->tmp = NULL; f->path = path;
    f->target = save_target(kind, path);
    if (!f->target) return -1;
    size_t n = strlen(f->target) + 64;
    f->tmp = malloc(n);
    if (!f->tmp) {
        free(f->target); f->target = NULL;
        return dp_error("out of memory writing %s file '%s'", kind, path);
    }
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned c = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
        snprintf(f->tmp, n, "%s.tmp%ld.%u", f->target, (long)getpid(), c);
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd >= 0) return 0;
        if (errno != EEXIST) break;
    }
    int e = errno;
    free(f->tmp); f->tmp = NULL;
    free(f->target); f->target = NULL;
    return dp_error("cannot write %s file '%s': %s", kind, path, strerror(e));
}

void dp_out_abandon(dp_out_file *f)
{
    if (f->fd >= 0) close(f->fd);
    if (f->tmp) { unlink(f->tmp); free(f->tmp); }
    free(f->target);
    f->fd = -1; f->tmp = NULL; f->target = NULL;
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
    if (rename(f->tmp, f->target) != 0) {
        int e = errno;
        dp_out_abandon(f);
        return dp_error("cannot write %s file '%s': %s", kind, f->path, strerror(e));
    }
    free(f->tmp); f->tmp = NULL;
    free(f->target); f->target = NULL;
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
