/*
 * ngauge_mpi_rma.c: see ngauge_mpi_rma.h. A fixed table of windows: `ngauge rma`
 * holds one at a time, so a handful of slots is plenty.
 */
#include "ngauge_mpi_rma.h"

#include <mpi.h>
#include <stddef.h>

#define MAX_WINDOWS 8
/* Window memory is allocated in whole pages: MPICH 4.0.2 (ch4, shared memory on
 * one host) addresses a peer's window at its base rounded down to 16 bytes, so a
 * size that is an odd multiple of 8 sends every put 8 bytes early
 * (docs/findings/2026-11-29-mpich-rma-window-alignment.md). */
#define WINDOW_ALIGN 4096

static MPI_Win wins[MAX_WINDOWS];
static int used[MAX_WINDOWS];

/* Rust hands out 0x1 as the address of an empty buffer; MPI may not accept it. */
static char dummy[16];
static inline void *nz(const void *p) {
    if (p == NULL || p == (const void *)1) return dummy;
    return (void *)p;
}

#define WIN(index, name)                                                                \
    MPI_Win name;                                                                       \
    do {                                                                                \
        if ((index) < 0 || (index) >= MAX_WINDOWS || !used[index]) return NGM_E_HANDLE; \
        name = wins[index];                                                             \
    } while (0)

static int typed(int dtype, int op, MPI_Datatype *t, MPI_Op *o) {
    switch (dtype) {
    case NGM_F64: *t = MPI_DOUBLE; break;
    case NGM_I64: *t = MPI_INT64_T; break;
    case NGM_U64: *t = MPI_UINT64_T; break;
    case NGM_I32: *t = MPI_INT32_T; break;
    default: return NGM_E_ARG;
    }
    switch (op) {
    case NGM_SUM: *o = MPI_SUM; break;
    case NGM_MAX: *o = MPI_MAX; break;
    case NGM_MIN: *o = MPI_MIN; break;
    case NGM_BOR: *o = MPI_BOR; break;
    default: return NGM_E_ARG;
    }
    return NGM_OK;
}

int ngm_win_allocate(long long bytes, void **base, int *win) {
    if (bytes < 0) return NGM_E_ARG;
    int slot = 0;
    while (slot < MAX_WINDOWS && used[slot]) slot++;
    if (slot == MAX_WINDOWS) return NGM_E_NOMEM;
    MPI_Win w;
    MPI_Aint padded = (MPI_Aint)((bytes + WINDOW_ALIGN - 1) / WINDOW_ALIGN * WINDOW_ALIGN);
    int rc = MPI_Win_allocate(padded, 1, MPI_INFO_NULL, MPI_COMM_WORLD, base, &w);
    if (rc != MPI_SUCCESS) return rc;
    MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN);
    wins[slot] = w;
    used[slot] = 1;
    *win = slot;
    return NGM_OK;
}

int ngm_win_free(int win) {
    WIN(win, w);
    int rc = MPI_Win_free(&w);
    used[win] = 0;
    return rc;
}

int ngm_win_lock_all(int win) {
    WIN(win, w);
    return MPI_Win_lock_all(0, w);
}

int ngm_win_unlock_all(int win) {
    WIN(win, w);
    return MPI_Win_unlock_all(w);
}

int ngm_win_flush(int win, int peer) {
    WIN(win, w);
    return MPI_Win_flush(peer, w);
}

int ngm_win_sync(int win) {
    WIN(win, w);
    int rc = MPI_Win_sync(w);
    if (rc != MPI_SUCCESS) return rc;
    int flag = 0;
    return MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

int ngm_win_fence(int win) {
    WIN(win, w);
    return MPI_Win_fence(0, w);
}

int ngm_put(int win, const void *buf, int len, int peer, long long disp) {
    WIN(win, w);
    if (len < 0 || disp < 0) return NGM_E_ARG;
    return MPI_Put(nz(buf), len, MPI_BYTE, peer, (MPI_Aint)disp, len, MPI_BYTE, w);
}

int ngm_get(int win, void *buf, int len, int peer, long long disp) {
    WIN(win, w);
    if (len < 0 || disp < 0) return NGM_E_ARG;
    return MPI_Get(nz(buf), len, MPI_BYTE, peer, (MPI_Aint)disp, len, MPI_BYTE, w);
}

int ngm_accumulate(int win, const void *buf, int count, int dtype, int op, int peer,
                   long long disp) {
    WIN(win, w);
    MPI_Datatype t;
    MPI_Op o;
    if (count < 0 || disp < 0 || typed(dtype, op, &t, &o)) return NGM_E_ARG;
    return MPI_Accumulate(nz(buf), count, t, peer, (MPI_Aint)disp, count, t, o, w);
}

int ngm_fetch_and_op(int win, const void *origin, void *result, int dtype, int op, int peer,
                     long long disp) {
    WIN(win, w);
    MPI_Datatype t;
    MPI_Op o;
    if (disp < 0 || typed(dtype, op, &t, &o)) return NGM_E_ARG;
    return MPI_Fetch_and_op(origin, result, t, peer, (MPI_Aint)disp, o, w);
}
