/* dist_mpi.c: MPI under torch.distributed: starting and finalising it, the group's
 * communicator (which also bootstraps NCCL), and the mpi backend's collectives on CPU
 * buffers.  Every function here is called with dp_group.lock held.
 *
 * Start and exit.  MPI is started here when the program has not started it
 * (MPI_THREAD_SERIALIZED), and finalised by an exit handler: after a clean exit of every
 * rank it finalises; after a failing exit (non-zero status) it leaves without finalising,
 * so that mpirun stops the other ranks at once instead of letting them wait for this one.
 *
 * Bounded waits.  A rank that destroys its group or exits tells every other rank, on a
 * communicator of its own, how many collective calls it made in the group.  Each call
 * starts with a check that every rank makes the same call (a hash of the call, its dtype
 * and shape, in one 16-byte all-reduce): mismatched calls fail on every rank with each
 * rank's call named, instead of MPI_ERR_TRUNCATE on one and garbage on the other.  That
 * check is where a rank waits for the others, so it is started non-blocking and polled;
 * while it waits, a rank reads the notices, and when a rank that left can no longer make
 * this call, it fails at once with a message naming that rank instead of waiting for
 * ever.  Once every rank has passed the check, all of them are in the call, and the data
 * moves with MPI's blocking collectives (its fastest).  The reducer's all-reduces overlap
 * backward, so they are non-blocking and polled the same way. */
#include "dist_comm.h"

#include <stdio.h>
#include <string.h>

bool dp_dist_has_mpi(void) {
#ifdef DP_HAVE_MPI
    return true;
#else
    return false;
#endif
}

#ifdef DP_HAVE_MPI

#include <dlfcn.h>
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

enum { NOTICE_TAG = 77, NOTICE_DESTROYED = 1, NOTICE_EXITED = 2 };

/* What a rank last said about leaving: its group's generation and the number of
 * collective calls it took part in there. */
typedef struct {
    int64_t kind;              /* 0 (nothing heard), NOTICE_DESTROYED or NOTICE_EXITED */
    int64_t generation, calls;
    int64_t in_group;          /* exited without destroy_process_group */
} peer_notice;

/* A notice on its way (the buffer must live until the send completes). */
typedef struct notice_send {
    struct notice_send *next;
    MPI_Request req;
    int64_t msg[4];
} notice_send;

static struct {
    bool started;              /* this library called MPI_Init_thread (and finalises at exit) */
    bool exit_hook;            /* the exit handler is registered */
    bool ready;                /* the communicators and peers below exist */
    bool ever_destroyed;       /* destroy_process_group ran: exit waits for the others unbounded */
    bool in_group;             /* comm is the live group's communicator */
    int world_rank, world_size;
    MPI_Comm comm;             /* the group's communicator: a duplicate of MPI_COMM_WORLD */
    MPI_Comm exit_comm;        /* the exit handshake */
    MPI_Comm notice_comm;      /* notices of ranks that leave */
    int64_t generation;        /* of the group, counted alike on every rank */
    int64_t calls;             /* collective calls made in this group (each its MPI operations) */
    peer_notice *peers;        /* world_size entries */
    notice_send *sends;
} mpi;

static int mpi_fail(const char *what, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
    return dp_error("torch.distributed: %s failed: %s", what, msg);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------ notices of leaving */

static void notice_send_all(int64_t kind) {
    for (int p = 0; p < mpi.world_size; p++) {
        if (p == mpi.world_rank) continue;
        notice_send *s = malloc(sizeof *s);
        if (!s) return;
        s->msg[0] = kind;
        s->msg[1] = mpi.generation;
        s->msg[2] = mpi.calls;
        s->msg[3] = mpi.in_group;
        if (MPI_Isend(s->msg, 4, MPI_INT64_T, p, NOTICE_TAG, mpi.notice_comm, &s->req) != MPI_SUCCESS) {
            free(s);
            return;
        }
        s->next = mpi.sends;
        mpi.sends = s;
    }
}

static void notice_store(int from, const int64_t *msg) {
    if (from < 0 || from >= mpi.world_size) return;
    mpi.peers[from] = (peer_notice){ .kind = msg[0], .generation = msg[1], .calls = msg[2], .in_group = msg[3] };
}

/* Reads the notices that have arrived. */
static void notice_poll(void) {
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, NOTICE_TAG, mpi.notice_comm, &flag, &st) != MPI_SUCCESS || !flag) return;
        int64_t msg[4];
        if (MPI_Recv(msg, 4, MPI_INT64_T, st.MPI_SOURCE, NOTICE_TAG, mpi.notice_comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        notice_store(st.MPI_SOURCE, msg);
    }
}

/* The first rank that left and cannot take part in collective call number `call` of this
 * group, or -1.  Counting calls, not MPI operations, keeps the numbers those of the program. */
static int notice_gone(int64_t call) {
    for (int p = 0; p < mpi.world_size; p++) {
        const peer_notice *n = &mpi.peers[p];
        if (n->kind == 0) continue;
        if ((n->generation == mpi.generation && n->calls < call) ||
            (n->kind == NOTICE_EXITED && n->generation < mpi.generation))
            return p;
    }
    return -1;
}

/* The message for a collective that can never complete because rank p left; marks the group
 * broken, since the collective stays started on this rank. */
static int peer_gone(int p, int64_t call, const char *where) {
    const peer_notice *n = &mpi.peers[p];
    char how[160];
    if (n->generation < mpi.generation)
        snprintf(how, sizeof how, "exited before joining this process group");
    else
        snprintf(how, sizeof how, "%s after %lld collective call%s in this group",
                 n->kind == NOTICE_DESTROYED ? "called destroy_process_group"
                 : n->in_group ? "exited" : "called destroy_process_group and exited",
                 (long long)n->calls, n->calls == 1 ? "" : "s");
    char msg[480];
    snprintf(msg, sizeof msg, "rank %d %s, while rank %d waits for it in call %lld, %s "
             "(every rank must make the same collective calls; a rank that finishes early leaves "
             "the others waiting)", p, how, mpi.world_rank, (long long)call, where);
    dp_dist_mark_broken(msg);
    return dp_error("torch.distributed: %s", msg);
}

/* Waits for the n operations of collective call number `call` of the group by polling, as
 * MPI_Waitall does, and reads the notices of ranks that left every millisecond; after the
 * first 10 ms it yields between polls, leaving the cores to the ranks it waits for. */
static int wait_all(int n, MPI_Request *req, int64_t call, const char *where) {
    double start = 0, last = 0;
    for (unsigned spin = 1;; spin++) {
        int done = 0;
        int e = MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
        if (e != MPI_SUCCESS) return mpi_fail(where, e);
        if (done) return 0;
        if (spin % 64) continue;
        double t = now_seconds();
        if (start == 0) start = last = t;
        if (t - last >= 1e-3) {
            last = t;
            notice_poll();
            int p = notice_gone(call);
            if (p >= 0) return peer_gone(p, call, where);
        }
        if (t - start > 0.01) sched_yield();
    }
}

static int wait_for(MPI_Request *req, int64_t call, const char *where) { return wait_all(1, req, call, where); }

/* ------------------------------------------------------------------ start and exit */

/* Seconds a rank that exits cleanly while still in a process group waits for the others to
 * exit too before it gives up on them (and leaves without finalising, which makes mpirun
 * stop the job): bounds how long a rank that quit early can keep the others waiting. */
static double exit_timeout(void) {
    const char *s = getenv("DPLUA_DIST_EXIT_TIMEOUT");
    double t = s ? atof(s) : 0;
    return t > 0 ? t : 10.0;
}

/* Every rank meets here at exit; MPI_Finalize is safe only when all of them did. */
static bool exit_handshake(double timeout) {
    MPI_Request req;
    if (MPI_Ibarrier(mpi.exit_comm, &req) != MPI_SUCCESS) return false;
    double deadline = now_seconds() + timeout;
    for (;;) {
        int done = 0;
        if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
        if (done) return true;
        if (timeout > 0 && now_seconds() > deadline) return false;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

/* After the handshake: every rank sent its exit notice before it, so each one is received
 * here, and this rank's own notices complete. */
static void notice_drain(void) {
    for (int p = 0; p < mpi.world_size; p++) {
        while (p != mpi.world_rank && mpi.peers[p].kind != NOTICE_EXITED) {
            int64_t msg[4];
            if (MPI_Recv(msg, 4, MPI_INT64_T, p, NOTICE_TAG, mpi.notice_comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                break;
            notice_store(p, msg);
        }
    }
    while (mpi.sends) {
        notice_send *s = mpi.sends;
        mpi.sends = s->next;
        MPI_Wait(&s->req, MPI_STATUS_IGNORE);
        free(s);
    }
}

static void dist_at_exit(int status, void *arg) {
    (void)arg;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized || !mpi.started) return;
    if (status != 0) return;   /* failing: leave unfinalised so that mpirun stops the job */
    pthread_mutex_lock(&dp_group.lock);
    if (dp_group.broken[0]) {
        /* a failure the program did not raise (inside backward): the job must not look clean */
        fprintf(stderr, "torch.distributed: rank %d: %s\n", mpi.world_rank, dp_group.broken);
        pthread_mutex_unlock(&dp_group.lock);
        return;
    }
    if (mpi.ready) notice_send_all(NOTICE_EXITED);
    bool clean = exit_handshake(mpi.in_group || !mpi.ever_destroyed ? exit_timeout() : 0);
    if (clean) {
        if (mpi.ready) {
            notice_drain();
            MPI_Comm_free(&mpi.notice_comm);
        }
        if (mpi.in_group) MPI_Comm_free(&mpi.comm);
        MPI_Comm_free(&mpi.exit_comm);
        mpi.in_group = false;
        dp_group.initialized = false;
        MPI_Finalize();
    } else {
        fprintf(stderr, "torch.distributed: rank %d exits while other ranks are still running; "
                        "the job is stopped\n", mpi.world_rank);
    }
    pthread_mutex_unlock(&dp_group.lock);
}

/* When this library was loaded with RTLD_LOCAL (stock lua5.4 loading torch.so), Open MPI's
 * plugins cannot see libmpi's symbols: load it again globally.  Also keeps this library
 * loaded until exit, since the exit handler lives in it. */
static void pin_libraries(void) {
    Dl_info info;
    if (dladdr((void *)&MPI_Init_thread, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    if (dladdr((void *)&dp_dist_init, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

static int env_int(const char *const *names, int *out) {
    for (int i = 0; names[i]; i++) {
        const char *s = getenv(names[i]);
        if (s && *s) {
            char *end;
            long v = strtol(s, &end, 10);
            if (*end == '\0' && v >= 0 && v < INT_MAX) { *out = (int)v; return 0; }
        }
    }
    return -1;
}

static int mpi_start(void) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized)
        return dp_error("torch.distributed.init_process_group: MPI was already finalized in this process");
    if (mpi.ready) return 0;
    if (!inited) {
        pin_libraries();
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) return mpi_fail("MPI_Init_thread", rc);
        mpi.started = true;   /* from here on, MPI belongs to the exit handler below */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int r = MPI_Comm_dup(MPI_COMM_WORLD, &mpi.exit_comm);
        if (r != MPI_SUCCESS) return mpi_fail("MPI_Comm_dup", r);
        if (!mpi.exit_hook) { on_exit(dist_at_exit, NULL); mpi.exit_hook = true; }
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi.world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi.world_size);
    mpi.peers = calloc((size_t)mpi.world_size, sizeof *mpi.peers);
    if (!mpi.peers) return dp_error("torch.distributed: out of memory");
    int r = MPI_Comm_dup(MPI_COMM_WORLD, &mpi.notice_comm);
    if (r != MPI_SUCCESS) { free(mpi.peers); mpi.peers = NULL; return mpi_fail("MPI_Comm_dup", r); }
    mpi.ready = true;
    return 0;
}

int dp_dist_mpi_group_create(void) {
    int rc = mpi_start();
    if (rc != 0) return rc;
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &mpi.comm);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Comm_dup", rc);
    MPI_Comm_set_errhandler(mpi.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(mpi.comm, &dp_group.rank);
    MPI_Comm_size(mpi.comm, &dp_group.world_size);
    static const char *const local_vars[] = { "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                              "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                              "PMI_LOCAL_RANK", NULL };
    if (env_int(local_vars, &dp_group.local_rank) != 0) {
        MPI_Comm node;
        rc = MPI_Comm_split_type(mpi.comm, MPI_COMM_TYPE_SHARED, dp_group.rank, MPI_INFO_NULL, &node);
        if (rc != MPI_SUCCESS) { MPI_Comm_free(&mpi.comm); return mpi_fail("MPI_Comm_split_type", rc); }
        MPI_Comm_rank(node, &dp_group.local_rank);
        MPI_Comm_free(&node);
    }
    mpi.generation++;
    mpi.calls = 0;
    mpi.in_group = true;
    return 0;
}

void dp_dist_mpi_group_free(void) {
    if (!mpi.in_group) return;
    MPI_Comm_free(&mpi.comm);
    mpi.in_group = false;
    mpi.ever_destroyed = true;
    notice_send_all(NOTICE_DESTROYED);
}

/* ------------------------------------------------------------------ collectives */

static MPI_Datatype mpi_type(dp_dtype dt) {
    switch (dt) {
    case DP_FLOAT32: return MPI_FLOAT;
    case DP_FLOAT64: return MPI_DOUBLE;
    case DP_INT64: return MPI_INT64_T;
    default: return MPI_C_BOOL;
    }
}

/* bools: sum, max and bor are "or", min, product and band "and", bxor "xor" */
static MPI_Op mpi_op(dp_dist_op op, dp_dtype dt) {
    if (dt == DP_BOOL)
        return op == DP_DIST_MIN || op == DP_DIST_PRODUCT || op == DP_DIST_BAND ? MPI_LAND
             : op == DP_DIST_BXOR ? MPI_LXOR : MPI_LOR;
    switch (op) {
    case DP_DIST_MAX: return MPI_MAX;
    case DP_DIST_MIN: return MPI_MIN;
    case DP_DIST_PRODUCT: return MPI_PROD;
    case DP_DIST_BAND: return MPI_BAND;
    case DP_DIST_BOR: return MPI_BOR;
    case DP_DIST_BXOR: return MPI_BXOR;
    default: return MPI_SUM;   /* sum, and avg (divided afterwards) */
    }
}

/* Checks a started operation's status and waits for it, as part of the current call. */
static int started(int e, MPI_Request *req, const char *fn, const char *where) {
    if (e != MPI_SUCCESS) return mpi_fail(fn, e);
    return wait_for(req, mpi.calls, where);
}

static void divide_in_place(void *data, dp_dtype dt, int64_t n, int64_t by) {
    if (dt == DP_FLOAT32) {
        float *p = data;
        for (int64_t i = 0; i < n; i++) p[i] /= (float)by;
    } else if (dt == DP_FLOAT64) {
        double *p = data;
        for (int64_t i = 0; i < n; i++) p[i] /= (double)by;
    } else if (dt == DP_INT64) {
        int64_t *p = data;   /* truncated, as NCCL's average of integers */
        for (int64_t i = 0; i < n; i++) p[i] /= by;
    }
}

static int mpi_all_reduce(void *data, int64_t n, dp_dtype dt, dp_device dev, dp_dist_op op, const char *where) {
    char *p = data;
    size_t es = dp_dtype_size(dt);
    for (int64_t done = 0; done < n;) {
        int count = (int)(n - done < INT_MAX ? n - done : INT_MAX);
        int e = MPI_Allreduce(MPI_IN_PLACE, p + done * es, count, mpi_type(dt), mpi_op(op, dt), mpi.comm);
        if (e != MPI_SUCCESS) return mpi_fail("MPI_Allreduce", e);
        done += count;
    }
    if (op == DP_DIST_AVG) divide_in_place(p, dt, n, dp_group.world_size);
    return 0;
}

static int mpi_broadcast(void *data, int64_t n, dp_dtype dt, dp_device dev, int src, const char *where) {
    char *p = data;
    size_t es = dp_dtype_size(dt);
    for (int64_t done = 0; done < n;) {
        int count = (int)(n - done < INT_MAX ? n - done : INT_MAX);
        int e = MPI_Bcast(p + done * es, count, mpi_type(dt), src, mpi.comm);
        if (e != MPI_SUCCESS) return mpi_fail("MPI_Bcast", e);
        done += count;
    }
    return 0;
}

static int mpi_all_gather(const void *send, void *recv, int64_t n, dp_dtype dt, dp_device dev, const char *where) {
    int e = MPI_Allgather(send, (int)n, mpi_type(dt), recv, (int)n, mpi_type(dt), mpi.comm);
    return e == MPI_SUCCESS ? 0 : mpi_fail("MPI_Allgather", e);
}

/* The reducer's work: a started all-reduce and its number in the group. */
typedef struct {
    MPI_Request req;
    int64_t call;
} mpi_work;

static int mpi_average_start(void *data, int64_t n, dp_dtype dt, dp_device dev, void **work, int64_t *divide_by) {
    mpi_work *w = malloc(sizeof *w);
    if (!w) return dp_error("torch.distributed: out of memory");
    int e = MPI_Iallreduce(MPI_IN_PLACE, data, (int)n, mpi_type(dt), MPI_SUM, mpi.comm, &w->req);
    if (e != MPI_SUCCESS) { free(w); return mpi_fail("MPI_Iallreduce", e); }
    w->call = ++mpi.calls;
    *work = w;
    *divide_by = dp_group.world_size;
    return 0;
}

static void mpi_progress(void *work) {
    mpi_work *w = work;
    int done = 0;
    if (w && w->req != MPI_REQUEST_NULL) MPI_Test(&w->req, &done, MPI_STATUS_IGNORE);
}

static int mpi_wait(void *work, dp_device dev, const char *where) {
    mpi_work *w = work;
    int rc = wait_for(&w->req, w->call, where);
    if (rc == 0) free(w);   /* (a collective that never completes keeps its request) */
    return rc;
}

const dp_dist_comm dp_dist_mpi_comm = {
    /* .name          = */ "mpi",
    /* .all_reduce    = */ mpi_all_reduce,
    /* .broadcast     = */ mpi_broadcast,
    /* .all_gather    = */ mpi_all_gather,
    /* .average_start = */ mpi_average_start,
    /* .progress      = */ mpi_progress,
    /* .wait          = */ mpi_wait,
    /* .group_free    = */ NULL,
};

int dp_dist_mpi_barrier(const char *where) {
    MPI_Request req;
    return started(MPI_Ibarrier(mpi.comm, &req), &req, "MPI_Ibarrier", where);
}

int dp_dist_mpi_bcast_bytes(void *buf, size_t n, int root, const char *where) {
    MPI_Request req;
    return started(MPI_Ibcast(buf, (int)n, MPI_BYTE, root, mpi.comm, &req), &req, "MPI_Ibcast", where);
}

int dp_dist_mpi_all_gather_bytes(const void *data, size_t n, char **out, size_t *lens) {
    int w = dp_group.world_size;
    int64_t mine = (int64_t)n;
    int64_t *all = malloc(sizeof(int64_t) * (size_t)w);
    int *counts = malloc(sizeof(int) * (size_t)w), *displs = malloc(sizeof(int) * (size_t)w);
    int rc = -1;
    MPI_Request req;
    *out = NULL;
    mpi.calls++;
    if (!all || !counts || !displs) { dp_error("torch.distributed: out of memory"); goto done; }
    int e = MPI_Iallgather(&mine, 1, MPI_INT64_T, all, 1, MPI_INT64_T, mpi.comm, &req);
    if (started(e, &req, "MPI_Iallgather", "all_gather of strings") != 0) goto done;
    int64_t total = 0;
    for (int i = 0; i < w; i++) {
        displs[i] = (int)total;
        counts[i] = (int)all[i];
        lens[i] = (size_t)all[i];
        total += all[i];
    }
    if (total > INT_MAX) { dp_error("torch.distributed: gathered strings too long (%lld bytes)", (long long)total); goto done; }
    *out = malloc((size_t)total + 1);
    if (!*out) { dp_error("torch.distributed: out of memory"); goto done; }
    /* (everyone is here: the lengths came from every rank) */
    e = MPI_Allgatherv(data, (int)n, MPI_BYTE, *out, counts, displs, MPI_BYTE, mpi.comm);
    if (e != MPI_SUCCESS) { mpi_fail("MPI_Allgatherv", e); free(*out); *out = NULL; goto done; }
    rc = 0;
done:
    free(all); free(counts); free(displs);
    return rc;
}

/* FNV-1a, kept to 62 bits so that it and its negation fit an int64_t. */
static int64_t call_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (int64_t)(h >> 2);
}

/* The element-wise maximum of h[0..1] over the ranks, in place, by dissemination: in round k
 * each rank sends what it has to rank + 2^k and takes the maximum with what rank - 2^k
 * sent, so after ceil(log2(world)) rounds every rank has heard from every other (which also
 * makes it a barrier).  Point-to-point messages, polled, cost a fraction of a non-blocking
 * MPI_Iallreduce (whose schedule Open MPI builds and runs in libnbc on every call); this
 * exchange opens every collective call, so its latency is the call's overhead.  The tags
 * keep the exchange apart from any other point-to-point traffic on the communicator
 * (collectives never match point-to-point messages). */
enum { CHECK_TAG = 1000 };

static int max_exchange(int64_t h[2], const char *where) {
    int w = dp_group.world_size, r = dp_group.rank;
    for (int k = 1, round = 0; k < w; k <<= 1, round++) {
        int64_t in[2];
        MPI_Request req[2];
        int e = MPI_Irecv(in, 2, MPI_INT64_T, (r - k + w) % w, CHECK_TAG + round, mpi.comm, &req[0]);
        if (e != MPI_SUCCESS) return mpi_fail("MPI_Irecv", e);
        e = MPI_Isend(h, 2, MPI_INT64_T, (r + k) % w, CHECK_TAG + round, mpi.comm, &req[1]);
        if (e != MPI_SUCCESS) {
            MPI_Cancel(&req[0]);
            MPI_Request_free(&req[0]);
            return mpi_fail("MPI_Isend", e);
        }
        if (wait_all(2, req, mpi.calls, where) != 0) {
            /* the sender left: take the receive back, since `in` goes out of scope */
            if (req[0] != MPI_REQUEST_NULL && MPI_Cancel(&req[0]) == MPI_SUCCESS)
                MPI_Wait(&req[0], MPI_STATUS_IGNORE);
            return -1;
        }
        if (in[0] > h[0]) h[0] = in[0];
        if (in[1] > h[1]) h[1] = in[1];
    }
    return 0;
}

int dp_dist_mpi_check_same(const char *who, const char *what) {
    /* the maximum of h and of -h over the ranks: every rank made this call iff max == min */
    int64_t h[2] = { call_hash(what), -call_hash(what) };
    mpi.calls++;   /* every call of the group but the reducer's and all_gather_bytes starts here */
    if (max_exchange(h, what) != 0) return -1;
    if (h[0] == -h[1]) return 0;
    int w = dp_group.world_size;
    size_t *lens = malloc(sizeof(size_t) * (size_t)w);
    char *calls = NULL;
    if (!lens) return dp_error("torch.distributed: out of memory");
    if (dp_dist_mpi_all_gather_bytes(what, strlen(what), &calls, lens) != 0) { free(lens); return -1; }
    char list[700] = "";
    size_t off = 0, len = 0;
    for (int r = 0, shown = 0; r < w; r++) {
        const char *c = calls + off;
        bool differs = r == 0 || lens[r] != lens[0] || memcmp(c, calls, lens[r]) != 0;
        off += lens[r];
        if (!differs) continue;
        if (shown++ == 6) { snprintf(list + len, sizeof list - len, "; ..."); break; }
        len += (size_t)snprintf(list + len, sizeof list - len, "%srank %d called %.*s", r ? "; " : "", r,
                                (int)lens[r], c);
        if (len >= sizeof list) break;
    }
    free(calls);
    free(lens);
    return dp_error("torch.distributed.%s: the ranks made different calls: %s (every rank must call the "
                    "collectives in the same order with tensors of the same shape and dtype)", who, list);
}

#else /* no MPI: the group cannot be made, so only these are reachable */

int dp_dist_mpi_group_create(void) { return dp_error("torch.distributed: this build has no MPI backend"); }
void dp_dist_mpi_group_free(void) {}
int dp_dist_mpi_barrier(const char *where) { return dp_error("torch.distributed: this build has no MPI backend"); }
int dp_dist_mpi_bcast_bytes(void *buf, size_t n, int root, const char *where) {
    return dp_error("torch.distributed: this build has no MPI backend to bootstrap NCCL");
}
int dp_dist_mpi_all_gather_bytes(const void *data, size_t n, char **out, size_t *lens) {
    return dp_error("torch.distributed: this build has no MPI backend");
}
int dp_dist_mpi_check_same(const char *who, const char *what) {
    return dp_error("torch.distributed: this build has no MPI backend");
}
const dp_dist_comm dp_dist_mpi_comm = { "mpi", NULL, NULL, NULL, NULL, NULL, NULL, NULL };

#endif /* DP_HAVE_MPI */
