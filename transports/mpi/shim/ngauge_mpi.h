/*
 * ngauge_mpi.h: the small, stable C ABI between ngauge (Rust) and an MPI library.
 *
 * MPI's handle types differ between implementations (pointers to structs in Open MPI,
 * plain ints in MPICH), and its constants are macros. None of that crosses this
 * boundary: communicators and requests are small int indices into tables kept here,
 * datatypes and reduction operations are the NGM_* codes below, lengths are ints.
 *
 * Return convention of every int function: 0 on success; a positive MPI error code
 * (describe it with ngm_error_string); or a negative NGM_E_* code from the shim.
 * Not thread safe: ngauge calls it only from the thread that initialized MPI.
 */
#ifndef NGAUGE_MPI_H
#define NGAUGE_MPI_H

#ifdef __cplusplus
extern "C" {
#endif

#define NGM_OK 0
#define NGM_E_TRUNCATE (-1) /* a message longer than the receive posted */
#define NGM_E_HANDLE (-2)   /* unknown communicator or request index */
#define NGM_E_NOMEM (-3)    /* the shim's tables could not grow */
#define NGM_E_ARG (-4)      /* unknown datatype or operation, negative length */
#define NGM_E_COUNT (-5)    /* a message shorter than the receive posted (ngm_pingpong) */
#define NGM_E_UNSUPPORTED (-6) /* not in this build or on this CPU (ngm_pingpong) */

/* Thread levels for ngm_init (MPI_THREAD_SINGLE .. MPI_THREAD_MULTIPLE). */
#define NGM_THREAD_SINGLE 0
#define NGM_THREAD_FUNNELED 1
#define NGM_THREAD_SERIALIZED 2
#define NGM_THREAD_MULTIPLE 3

/* Element types of reductions. */
#define NGM_F64 0
#define NGM_I64 1
#define NGM_U64 2
#define NGM_I32 3

/* Reduction operations. */
#define NGM_SUM 0
#define NGM_MAX 1
#define NGM_MIN 2
#define NGM_BOR 3

/* Lifecycle. ngm_init calls MPI_Init_thread and sets MPI_ERRORS_RETURN on
 * MPI_COMM_WORLD; *provided receives the NGM_THREAD_* level granted. */
int ngm_init(int required, int *provided);
int ngm_finalize(void);
/* MPI_Abort(MPI_COMM_WORLD, code): ends every rank of the job. */
int ngm_abort(int code);
int ngm_initialized(void);
int ngm_finalized(void);
/* Writes a NUL-terminated string of at most cap bytes. */
void ngm_library_version(char *buf, int cap);
void ngm_error_string(int code, char *buf, int cap);
/* 1 for the Open MPI flavour, 2 for MPICH (compile-time facts of the mpi.h used). */
int ngm_flavor(void);

double ngm_wtime(void);
double ngm_wtick(void);

/* Communicators: index 0 is MPI_COMM_WORLD itself (the only one ngauge uses: its
 * control plane has tags of its own there); dup returns a new index. */
int ngm_comm_dup_world(int *comm);
int ngm_comm_free(int comm);
int ngm_comm_rank(int comm, int *rank);
int ngm_comm_size(int comm, int *size);

/* Point-to-point, bytes. *got is the length that arrived. */
int ngm_send(int comm, const void *buf, int len, int peer, int tag);
int ngm_recv(int comm, void *buf, int len, int peer, int tag, int *got);
int ngm_isend(int comm, const void *buf, int len, int peer, int tag, int *req);
int ngm_irecv(int comm, void *buf, int len, int peer, int tag, int *req);
/* *done is 1 when MPI freed the request (completed, or failed and freed it) and the
 * shim retired its slot; then the return code is the operation's outcome. *done is 0
 * while MPI still holds the request, even when an error is returned: its buffers
 * still belong to MPI and the slot stays valid. *got is the received length of a
 * successful receive, -1 for everything else. */
int ngm_test(int req, int *done, int *got);
int ngm_wait(int req, int *done, int *got);
/* A ping-pong loop with peer on MPI_COMM_WORLD, tag 0, MPI_BYTE: what a C latency
 * benchmark times, with nothing of ngauge's between the two counter readings.
 * initiator != 0: warmup + count round trips of MPI_Send(sbuf, slen) then
 *   MPI_Recv(rbuf, rlen), each between t0 = rdtscp; lfence and t1 = rdtscp; lfence
 *   (plain != 0: a plain rdtsc each, ngauge's --timer rdtsc);
 *   round trip i >= warmup stores t1 - t0 in ticks[i - warmup] (count slots).
 * initiator == 0: warmup + count round trips of MPI_Recv then MPI_Send (ticks unused).
 * Stops at the first failure: a positive MPI code or NGM_E_TRUNCATE from either call,
 * or NGM_E_COUNT with *got the length that arrived when a receive brought fewer
 * than rlen bytes; *in_recv says whether the receive (1) or the send (0) failed.
 * NGM_E_UNSUPPORTED, before any MPI call, off x86-64 or on a CPU without rdtscp. */
int ngm_pingpong(int initiator, int plain, int peer, const void *sbuf, int slen, void *rbuf,
                 int rlen, long long warmup, long long count, unsigned long long *ticks,
                 int *got, int *in_recv);

/* Number of requests in flight (for leak checks in tests). */
int ngm_requests_in_flight(void);

/* Collectives (byte counts per rank unless count says elements). */
int ngm_barrier(int comm);
int ngm_ibarrier(int comm, int *req);
int ngm_bcast(int comm, void *buf, int len, int root);
int ngm_ibcast(int comm, void *buf, int len, int root, int *req);
int ngm_reduce(int comm, const void *send, void *recv, int count, int dtype, int op,
               int root);
int ngm_ireduce(int comm, const void *send, void *recv, int count, int dtype, int op,
                int root, int *req);
int ngm_allreduce(int comm, const void *send, void *recv, int count, int dtype, int op);
int ngm_iallreduce(int comm, const void *send, void *recv, int count, int dtype, int op,
                   int *req);
int ngm_gather(int comm, const void *send, int len, void *recv, int root);
int ngm_igather(int comm, const void *send, int len, void *recv, int root, int *req);
int ngm_gatherv(int comm, const void *send, int len, void *recv, const int *lens,
                const int *displs, int root);
int ngm_igatherv(int comm, const void *send, int len, void *recv, const int *lens,
                 const int *displs, int root, int *req);
int ngm_allgather(int comm, const void *send, int len, void *recv);
int ngm_iallgather(int comm, const void *send, int len, void *recv, int *req);
int ngm_allgatherv(int comm, const void *send, int len, void *recv, const int *lens,
                   const int *displs);
int ngm_iallgatherv(int comm, const void *send, int len, void *recv, const int *lens,
                    const int *displs, int *req);
int ngm_alltoall(int comm, const void *send, int len, void *recv);
int ngm_ialltoall(int comm, const void *send, int len, void *recv, int *req);
/* layout: sendcounts, sdispls, recvcounts, rdispls, each comm-size ints (bytes). */
int ngm_alltoallv(int comm, const void *send, const int *layout, void *recv);
int ngm_ialltoallv(int comm, const void *send, const int *layout, void *recv, int *req);
int ngm_scatter(int comm, const void *send, int len, void *recv, int root);
int ngm_iscatter(int comm, const void *send, int len, void *recv, int root, int *req);
int ngm_reduce_scatter_block(int comm, const void *send, void *recv, int count, int dtype,
                             int op);
int ngm_ireduce_scatter_block(int comm, const void *send, void *recv, int count, int dtype,
                              int op, int *req);

#ifdef __cplusplus
}
#endif
#endif
