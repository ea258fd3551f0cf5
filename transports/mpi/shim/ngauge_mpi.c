/*
 * ngauge_mpi.c: see ngauge_mpi.h. Keeps MPI handles in two tables (communicators and
 * requests) and hands out their indices; translates NGM_* codes into MPI constants.
 */
#include "ngauge_mpi.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

/* Rust hands out 0x1 as the address of an empty buffer, and 0x1 is MPI_IN_PLACE in
 * Open MPI: every buffer goes through NZ, which swaps such addresses for a real one. */
static char dummy[16];
static inline void *nz(const void *p) {
    if (p == NULL || p == (const void *)1 || p == MPI_IN_PLACE) return dummy;
    return (void *)p;
}
#define NZ(p) nz(p)

/* ---- tables ----------------------------------------------------------------- */

static MPI_Comm *comms;
static int ncomms, capcomms;

static MPI_Request *reqs;
static unsigned char *req_kind; /* 0 free, 1 send or collective, 2 receive */
static int *free_reqs; /* stack of free slots */
static int nfree, capreqs, in_flight;

static int comm_of(int index, MPI_Comm *out) {
    if (index < 0 || index >= ncomms || comms[index] == MPI_COMM_NULL) return NGM_E_HANDLE;
    *out = comms[index];
    return NGM_OK;
}

static int add_comm(MPI_Comm c, int *index) {
    if (ncomms == capcomms) {
        int cap = capcomms ? 2 * capcomms : 8;
        MPI_Comm *grown = realloc(comms, (size_t)cap * sizeof *grown);
        if (!grown) return NGM_E_NOMEM;
        comms = grown;
        capcomms = cap;
    }
    comms[ncomms] = c;
    *index = ncomms++;
    return NGM_OK;
}

/* Reserves a request slot; the caller stores the MPI_Request in reqs[*slot]. */
static int reserve_req(int is_recv, int *slot) {
    if (nfree == 0) {
        int cap = capreqs ? 2 * capreqs : 64;
        MPI_Request *r = realloc(reqs, (size_t)cap * sizeof *r);
        if (!r) return NGM_E_NOMEM;
        reqs = r;
        unsigned char *k = realloc(req_kind, (size_t)cap);
        if (!k) return NGM_E_NOMEM;
        req_kind = k;
        int *f = realloc(free_reqs, (size_t)cap * sizeof *f);
        if (!f) return NGM_E_NOMEM;
        free_reqs = f;
        for (int i = cap - 1; i >= capreqs; i--) {
            reqs[i] = MPI_REQUEST_NULL;
            req_kind[i] = 0;
            free_reqs[nfree++] = i;
        }
        capreqs = cap;
    }
    *slot = free_reqs[--nfree];
    req_kind[*slot] = is_recv ? 2 : 1;
    in_flight++;
    return NGM_OK;
}

static void release_req(int slot) {
    reqs[slot] = MPI_REQUEST_NULL;
    req_kind[slot] = 0;
    free_reqs[nfree++] = slot;
    in_flight--;
}

/* A started operation: keep the slot if MPI accepted it, give it back if not. */
static int started(int rc, int slot, int *req) {
    if (rc != MPI_SUCCESS) {
        release_req(slot);
        return rc;
    }
    *req = slot;
    return NGM_OK;
}

static int req_valid(int req) { return req >= 0 && req < capreqs && req_kind[req] != 0; }

static int translate(int rc) {
    if (rc == MPI_SUCCESS) return NGM_OK;
    int cls = 0;
    if (MPI_Error_class(rc, &cls) == MPI_SUCCESS && cls == MPI_ERR_TRUNCATE)
        return NGM_E_TRUNCATE;
    return rc;
}

/* The byte count of a completed receive. MPI_Get_count is a checked library call
 * that shows in a 1-byte latency; the public mpi.h of Open MPI 2-5 (`_ucount`, bytes)
 * and MPICH (`count_lo` + `count_hi_and_cancelled`) let the shim read the count
 * directly, as their own macros do. Anything else goes through MPI_Get_count. */
static inline int status_bytes(MPI_Status *status, int *got) {
#if defined(OPEN_MPI) && defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 2 &&        \
    OMPI_MAJOR_VERSION <= 5
    *got = (int)status->_ucount;
    return MPI_SUCCESS;
#elif defined(MPICH_VERSION) && defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 30000000
    MPI_Count count = (MPI_Count)(((MPI_Count)((unsigned int)status->count_hi_and_cancelled >> 1))
                                  << (8 * sizeof(int))) +
                      (unsigned int)status->count_lo;
    *got = (int)count;
    return MPI_SUCCESS;
#else
    return MPI_Get_count(status, MPI_BYTE, got);
#endif
}

static int dtype_of(int code, MPI_Datatype *out) {
    switch (code) {
    case NGM_F64: *out = MPI_DOUBLE; return NGM_OK;
    case NGM_I64: *out = MPI_INT64_T; return NGM_OK;
    case NGM_U64: *out = MPI_UINT64_T; return NGM_OK;
    case NGM_I32: *out = MPI_INT32_T; return NGM_OK;
    default: return NGM_E_ARG;
    }
}

static int op_of(int code, MPI_Op *out) {
    switch (code) {
    case NGM_SUM: *out = MPI_SUM; return NGM_OK;
    case NGM_MAX: *out = MPI_MAX; return NGM_OK;
    case NGM_MIN: *out = MPI_MIN; return NGM_OK;
    case NGM_BOR: *out = MPI_BOR; return NGM_OK;
    default: return NGM_E_ARG;
    }
}

#define COMM(index, name)                                                               \
    MPI_Comm name;                                                                      \
    do {                                                                                \
        int rc_ = comm_of(index, &name);                                                \
        if (rc_) return rc_;                                                            \
    } while (0)

#define NONNEG(x)                                                                       \
    do {                                                                                \
        if ((x) < 0) return NGM_E_ARG;                                                  \
    } while (0)

/* ---- lifecycle -------------------------------------------------------------- */

int ngm_init(int required, int *provided) {
    static const int levels[4] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED,
                                  MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE};
    if (required < 0 || required > 3) return NGM_E_ARG;
    int got = 0;
    int rc = MPI_Init_thread(NULL, NULL, levels[required], &got);
    if (rc != MPI_SUCCESS) return rc;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    *provided = 0;
    for (int i = 0; i < 4; i++)
        if (levels[i] == got) *provided = i;
    int index;
    return add_comm(MPI_COMM_WORLD, &index);
}

int ngm_finalize(void) {
    int rc = MPI_Finalize();
    free(comms);
    free(reqs);
    free(req_kind);
    free(free_reqs);
    comms = NULL;
    reqs = NULL;
    req_kind = NULL;
    free_reqs = NULL;
    ncomms = capcomms = nfree = capreqs = in_flight = 0;
    return rc;
}

int ngm_abort(int code) { return MPI_Abort(MPI_COMM_WORLD, code); }

int ngm_initialized(void) {
    int flag = 0;
    MPI_Initialized(&flag);
    return flag;
}

int ngm_finalized(void) {
    int flag = 0;
    MPI_Finalized(&flag);
    return flag;
}

void ngm_library_version(char *buf, int cap) {
    if (cap <= 0) return;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(version, &len) != MPI_SUCCESS) len = 0;
    if (len >= cap) len = cap - 1;
    memcpy(buf, version, (size_t)len);
    buf[len] = '\0';
}

void ngm_error_string(int code, char *buf, int cap) {
    if (cap <= 0) return;
    const char *fixed = NULL;
    switch (code) {
    case NGM_E_TRUNCATE: fixed = "message longer than the posted receive"; break;
    case NGM_E_HANDLE: fixed = "unknown communicator or request handle"; break;
    case NGM_E_NOMEM: fixed = "out of memory in the MPI shim"; break;
    case NGM_E_ARG: fixed = "invalid argument to the MPI shim"; break;
    case NGM_E_COUNT: fixed = "message shorter than the posted receive"; break;
    case NGM_E_UNSUPPORTED: fixed = "not supported by this build or CPU"; break;
    default: break;
    }
    if (fixed) {
        strncpy(buf, fixed, (size_t)cap - 1);
        buf[cap - 1] = '\0';
        return;
    }
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
    if (len >= cap) len = cap - 1;
    memcpy(buf, text, (size_t)len);
    buf[len] = '\0';
}

int ngm_flavor(void) {
#if defined(OPEN_MPI)
    return 1;
#elif defined(MPICH_VERSION)
    return 2;
#else
    return 0;
#endif
}

double ngm_wtime(void) { return MPI_Wtime(); }
double ngm_wtick(void) { return MPI_Wtick(); }

/* ---- communicators ---------------------------------------------------------- */

int ngm_comm_dup_world(int *comm) {
    MPI_Comm dup;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    if (rc != MPI_SUCCESS) return rc;
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    return add_comm(dup, comm);
}

int ngm_comm_free(int comm) {
    if (comm == 0) return NGM_E_HANDLE; /* never free MPI_COMM_WORLD */
    COMM(comm, c);
    int rc = MPI_Comm_free(&c);
    comms[comm] = MPI_COMM_NULL;
    return rc;
}

int ngm_comm_rank(int comm, int *rank) {
    COMM(comm, c);
    return MPI_Comm_rank(c, rank);
}

int ngm_comm_size(int comm, int *size) {
    COMM(comm, c);
    return MPI_Comm_size(c, size);
}

/* ---- point-to-point --------------------------------------------------------- */

/* The blocking pair is what a latency measurement times, so every instruction here
 * lands in ngauge's round trip (scripts/bench-mpi compares it with a C ping-pong
 * that has none): index 0, MPI_COMM_WORLD, needs no table lookup, and ngm_send
 * returns MPI_Send's code as it is (a send cannot be truncated, so there is nothing
 * to translate), which lets the compiler end it with a tail call. */
#define WORLD_OR(index, name)                                                           \
    MPI_Comm name = MPI_COMM_WORLD;                                                     \
    do {                                                                                \
        if (__builtin_expect((index) != 0, 0)) {                                        \
            int rc_ = comm_of(index, &name);                                            \
            if (rc_) return rc_;                                                        \
        }                                                                               \
    } while (0)

int ngm_send(int comm, const void *buf, int len, int peer, int tag) {
    WORLD_OR(comm, c);
    NONNEG(len);
    return MPI_Send(NZ(buf), len, MPI_BYTE, peer, tag, c);
}

int ngm_recv(int comm, void *buf, int len, int peer, int tag, int *got) {
    WORLD_OR(comm, c);
    NONNEG(len);
    MPI_Status status;
    int rc = MPI_Recv(NZ(buf), len, MPI_BYTE, peer, tag, c, &status);
    if (__builtin_expect(rc != MPI_SUCCESS, 0)) return translate(rc);
    return status_bytes(&status, got);
}

int ngm_isend(int comm, const void *buf, int len, int peer, int tag, int *req) {
    COMM(comm, c);
    NONNEG(len);
    int slot, rc = reserve_req(0, &slot);
    if (rc) return rc;
    return started(MPI_Isend(NZ(buf), len, MPI_BYTE, peer, tag, c, &reqs[slot]), slot, req);
}

int ngm_irecv(int comm, void *buf, int len, int peer, int tag, int *req) {
    COMM(comm, c);
    NONNEG(len);
    int slot, rc = reserve_req(1, &slot);
    if (rc) return rc;
    return started(MPI_Irecv(NZ(buf), len, MPI_BYTE, peer, tag, c, &reqs[slot]), slot, req);
}

/* The native ping-pong loop (see the header). Its timed region is the one of
 * benches/c/mpi_pingpong.c: the same counter reading (rdtscp; lfence, as ngauge's
 * clock), MPI_Send, MPI_Recv, the same reading. The only additions are the checks a
 * C benchmark leaves to MPI_ERRORS_ARE_FATAL: MPI_Send's return code before the
 * receive (a failed send must not wait for an answer), and, after the second
 * reading, MPI_Recv's return code and the received length, read from the status as
 * mpi.h defines it (status_bytes), so a short message is an error as in ngm_recv. */
#if defined(__x86_64__)
static inline unsigned long long tsc(void) {
    unsigned aux;
    unsigned long long t = __rdtscp(&aux);
    _mm_lfence();
    return t;
}

/* A plain rdtsc, as ngauge's clock reads under --timer rdtsc. */
static inline unsigned long long tsc_plain(void) { return __rdtsc(); }

/* The initiator's round trips, each between two readings of READ (one loop per
 * reading, so that the timed region holds no branch on it). */
#define INITIATOR_LOOP(READ)                                                           \
    for (long long i = -warmup; i < count; i++) {                                      \
        unsigned long long t0 = READ();                                                \
        rc = MPI_Send(s, slen, MPI_BYTE, peer, 0, MPI_COMM_WORLD);                     \
        if (__builtin_expect(rc != MPI_SUCCESS, 0)) return rc;                         \
        rc = MPI_Recv(r, rlen, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &status);            \
        unsigned long long t1 = READ();                                                \
        if (i >= 0) ticks[i] = t1 - t0;                                                \
        rc = received(rc, &status, rlen, got, in_recv);                                \
        if (__builtin_expect(rc != NGM_OK, 0)) return rc;                              \
    }

/* CPUID leaf 0x80000001, EDX bit 27: the rdtscp instruction. */
static int has_rdtscp(void) {
    static int known = -1;
    if (known < 0) {
        unsigned a = 0, b = 0, c = 0, d = 0;
        known = __get_cpuid(0x80000001u, &a, &b, &c, &d) && (d & (1u << 27)) != 0;
    }
    return known;
}
#endif

/* The outcome of a receive in the loop: NGM_OK, an error, or NGM_E_COUNT. */
static inline int received(int rc, MPI_Status *status, int rlen, int *got, int *in_recv) {
    if (__builtin_expect(rc != MPI_SUCCESS, 0)) {
        *in_recv = 1;
        return translate(rc);
    }
    int n = -1;
    rc = status_bytes(status, &n);
    if (__builtin_expect(rc != MPI_SUCCESS || n != rlen, 0)) {
        *in_recv = 1;
        *got = n;
        return rc != MPI_SUCCESS ? rc : NGM_E_COUNT;
    }
    return NGM_OK;
}

int ngm_pingpong(int initiator, int plain, int peer, const void *sbuf, int slen, void *rbuf,
                 int rlen, long long warmup, long long count, unsigned long long *ticks,
                 int *got, int *in_recv) {
    *got = -1;
    *in_recv = 0;
#if defined(__x86_64__)
    if (!has_rdtscp()) return NGM_E_UNSUPPORTED;
    NONNEG(slen);
    NONNEG(rlen);
    if (warmup < 0 || count < 0) return NGM_E_ARG;
    void *s = NZ(sbuf), *r = NZ(rbuf);
    MPI_Status status;
    int rc;
    if (initiator && plain) {
        INITIATOR_LOOP(tsc_plain)
    } else if (initiator) {
        INITIATOR_LOOP(tsc)
    } else {
        for (long long i = -warmup; i < count; i++) {
            rc = MPI_Recv(r, rlen, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &status);
            rc = received(rc, &status, rlen, got, in_recv);
            if (__builtin_expect(rc != NGM_OK, 0)) return rc;
            rc = MPI_Send(s, slen, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
            if (__builtin_expect(rc != MPI_SUCCESS, 0)) return rc;
        }
    }
    return NGM_OK;
#else
    (void)initiator, (void)plain, (void)peer, (void)sbuf, (void)slen, (void)rbuf, (void)rlen;
    (void)warmup, (void)count, (void)ticks;
    return NGM_E_UNSUPPORTED;
#endif
}

/* Completes a test or wait. A request MPI freed (MPI_REQUEST_NULL) is retired here,
 * successful or not, and reported done; one MPI still holds (an error returned
 * before completion) keeps its slot and is reported not done, whatever rc says: its
 * buffer still belongs to MPI, so the caller must keep it alive and busy. */
static int finish(int req, int rc, MPI_Status *status, int *done, int *got) {
    *got = -1;
    if (reqs[req] != MPI_REQUEST_NULL) {
        *done = 0;
        return translate(rc);
    }
    *done = 1;
    int is_recv = req_kind[req] == 2;
    release_req(req);
    if (rc != MPI_SUCCESS) return translate(rc);
    if (is_recv) return status_bytes(status, got);
    return NGM_OK;
}

int ngm_test(int req, int *done, int *got) {
    *done = 0;
    *got = -1;
    if (!req_valid(req)) return NGM_E_HANDLE;
    MPI_Status status;
    int flag = 0;
    int rc = MPI_Test(&reqs[req], &flag, &status);
    if (rc == MPI_SUCCESS && !flag) return NGM_OK;
    return finish(req, rc, &status, done, got);
}

int ngm_wait(int req, int *done, int *got) {
    *done = 0;
    *got = -1;
    if (!req_valid(req)) return NGM_E_HANDLE;
    MPI_Status status;
    int rc = MPI_Wait(&reqs[req], &status);
    return finish(req, rc, &status, done, got);
}

int ngm_requests_in_flight(void) { return in_flight; }

/* ---- collectives ------------------------------------------------------------ */

#define START(call)                                                                     \
    do {                                                                                \
        int slot_, rc_ = reserve_req(0, &slot_);                                        \
        if (rc_) return rc_;                                                            \
        MPI_Request *r_ = &reqs[slot_];                                                 \
        return started((call), slot_, req);                                             \
    } while (0)

int ngm_barrier(int comm) {
    COMM(comm, c);
    return MPI_Barrier(c);
}

int ngm_ibarrier(int comm, int *req) {
    COMM(comm, c);
    START(MPI_Ibarrier(c, r_));
}

int ngm_bcast(int comm, void *buf, int len, int root) {
    COMM(comm, c);
    NONNEG(len);
    return MPI_Bcast(NZ(buf), len, MPI_BYTE, root, c);
}

int ngm_ibcast(int comm, void *buf, int len, int root, int *req) {
    COMM(comm, c);
    NONNEG(len);
    START(MPI_Ibcast(NZ(buf), len, MPI_BYTE, root, c, r_));
}

#define TYPED(dtype, op, t, o)                                                          \
    MPI_Datatype t;                                                                     \
    MPI_Op o;                                                                           \
    if (dtype_of(dtype, &t) || op_of(op, &o)) return NGM_E_ARG

int ngm_reduce(int comm, const void *send, void *recv, int count, int dtype, int op,
               int root) {
    COMM(comm, c);
    NONNEG(count);
    TYPED(dtype, op, t, o);
    return MPI_Reduce(NZ(send), NZ(recv), count, t, o, root, c);
}

int ngm_ireduce(int comm, const void *send, void *recv, int count, int dtype, int op,
                int root, int *req) {
    COMM(comm, c);
    NONNEG(count);
    TYPED(dtype, op, t, o);
    START(MPI_Ireduce(NZ(send), NZ(recv), count, t, o, root, c, r_));
}

int ngm_allreduce(int comm, const void *send, void *recv, int count, int dtype, int op) {
    COMM(comm, c);
    NONNEG(count);
    TYPED(dtype, op, t, o);
    return MPI_Allreduce(NZ(send), NZ(recv), count, t, o, c);
}

int ngm_iallreduce(int comm, const void *send, void *recv, int count, int dtype, int op,
                   int *req) {
    COMM(comm, c);
    NONNEG(count);
    TYPED(dtype, op, t, o);
    START(MPI_Iallreduce(NZ(send), NZ(recv), count, t, o, c, r_));
}

int ngm_gather(int comm, const void *send, int len, void *recv, int root) {
    COMM(comm, c);
    NONNEG(len);
    return MPI_Gather(NZ(send), len, MPI_BYTE, NZ(recv), len, MPI_BYTE, root, c);
}

int ngm_igather(int comm, const void *send, int len, void *recv, int root, int *req) {
    COMM(comm, c);
    NONNEG(len);
    START(MPI_Igather(NZ(send), len, MPI_BYTE, NZ(recv), len, MPI_BYTE, root, c, r_));
}

int ngm_gatherv(int comm, const void *send, int len, void *recv, const int *lens,
                const int *displs, int root) {
    COMM(comm, c);
    NONNEG(len);
    return MPI_Gatherv(NZ(send), len, MPI_BYTE, NZ(recv), lens, displs, MPI_BYTE, root, c);
}

int ngm_igatherv(int comm, const void *send, int len, void *recv, const int *lens,
                 const int *displs, int root, int *req) {
    COMM(comm, c);
    NONNEG(len);
    START(MPI_Igatherv(NZ(send), len, MPI_BYTE, NZ(recv), lens, displs, MPI_BYTE, root, c, r_));
}

int ngm_allgather(int comm, const void *send, int len, void *recv) {
    COMM(comm, c);
    NONNEG(len);
    return MPI_Allgather(NZ(send), len, MPI_BYTE, NZ(recv), len, MPI_BYTE, c);
}

int ngm_iallgather(int comm, const void *send, int len, void *recv, int *req) {
    COMM(comm, c);
    NONNEG(len);
    START(MPI_Iallgather(NZ(send), len, MPI_BYTE, NZ(recv), len, MPI_BYTE, c, r_));
}

int ngm_allgatherv(int comm, const void *send, int len, void *recv, const int *lens,
                   const int *displs) {
    COMM(comm, c);
    NONNEG(len);
    return MPI_Allgatherv(NZ(send), len, MPI_BYTE, NZ(recv), lens, displs, MPI_BYTE, c);
}

int ngm_iallgatherv(int comm, const void *send, int len, void *recv, const int *lens,
                    const int *displs, int *req) {
    COMM(comm, c);
    NONNEG(len);
    START(MPI_Iallgatherv(NZ(send), len, MPI_BYTE, NZ(recv), lens, displs, MPI_BYTE, c, r_));
}

int ngm_alltoall(int comm, const void *send, int len, void *recv) {
    COMM(comm, c);
    NONNEG(len);
    return MPI_Alltoall(NZ(send), len, MPI_BYTE, NZ(recv), len, MPI_BYTE, c);
}

int ngm_ialltoall(int comm, const void *send, int len, void *recv, int *req) {
    COMM(comm, c);
    NONNEG(len);
    START(MPI_Ialltoall(NZ(send), len, MPI_BYTE, NZ(recv), len, MPI_BYTE, c, r_));
}

int ngm_alltoallv(int comm, const void *send, const int *layout, void *recv) {
    COMM(comm, c);
    int n;
    MPI_Comm_size(c, &n);
    const int *sc = layout, *sd = layout + n, *rc = layout + 2 * n, *rd = layout + 3 * n;
    return MPI_Alltoallv(NZ(send), sc, sd, MPI_BYTE, NZ(recv), rc, rd, MPI_BYTE, c);
}

int ngm_ialltoallv(int comm, const void *send, const int *layout, void *recv, int *req) {
    COMM(comm, c);
    int n;
    MPI_Comm_size(c, &n);
    const int *sc = layout, *sd = layout + n, *rc = layout + 2 * n, *rd = layout + 3 * n;
    START(MPI_Ialltoallv(NZ(send), sc, sd, MPI_BYTE, NZ(recv), rc, rd, MPI_BYTE, c, r_));
}

int ngm_scatter(int comm, const void *send, int len, void *recv, int root) {
    COMM(comm, c);
    NONNEG(len);
    return MPI_Scatter(NZ(send), len, MPI_BYTE, NZ(recv), len, MPI_BYTE, root, c);
}

int ngm_iscatter(int comm, const void *send, int len, void *recv, int root, int *req) {
    COMM(comm, c);
    NONNEG(len);
    START(MPI_Iscatter(NZ(send), len, MPI_BYTE, NZ(recv), len, MPI_BYTE, root, c, r_));
}

int ngm_reduce_scatter_block(int comm, const void *send, void *recv, int count, int dtype,
                             int op) {
    COMM(comm, c);
    NONNEG(count);
    TYPED(dtype, op, t, o);
    return MPI_Reduce_scatter_block(NZ(send), NZ(recv), count, t, o, c);
}

int ngm_ireduce_scatter_block(int comm, const void *send, void *recv, int count, int dtype,
                              int op, int *req) {
    COMM(comm, c);
    NONNEG(count);
    TYPED(dtype, op, t, o);
    START(MPI_Ireduce_scatter_block(NZ(send), NZ(recv), count, t, o, c, r_));
}
