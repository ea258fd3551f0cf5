/*
 * ngauge_mpi_rma.h: MPI one-sided communication for `ngauge rma`, in the conventions
 * of ngauge_mpi.h (windows are small int indices into a table kept here, datatypes
 * and operations are the NGM_* codes, return 0 / positive MPI code / negative NGM_E_*).
 *
 * Every window is allocated on MPI_COMM_WORLD by MPI_Win_allocate with a
 * displacement unit of 1 byte, so a displacement is a byte offset, and gets
 * MPI_ERRORS_RETURN. Not thread safe, like the rest of the shim.
 */
#ifndef NGAUGE_MPI_RMA_H
#define NGAUGE_MPI_RMA_H

#include "ngauge_mpi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over MPI_COMM_WORLD: every rank allocates bytes (padded to whole pages,
 * see ngauge_mpi_rma.c); *base receives the local memory (valid until ngm_win_free), *win the index. */
int ngm_win_allocate(long long bytes, void **base, int *win);
/* Collective: frees the window and its memory. */
int ngm_win_free(int win);

/* Passive target: MPI_Win_lock_all(0) / MPI_Win_unlock_all; MPI_Win_flush(peer)
 * completes this rank's operations to peer at both ends. */
int ngm_win_lock_all(int win);
int ngm_win_unlock_all(int win);
int ngm_win_flush(int win, int peer);
/* MPI_Win_sync (the public and private copies of the local window agree), then one
 * MPI_Iprobe on MPI_COMM_WORLD so that a library that progresses one-sided traffic
 * only inside MPI calls (Open MPI's osc pt2pt) moves it on while a rank polls. */
int ngm_win_sync(int win);
/* Active target: MPI_Win_fence(0). Collective. */
int ngm_win_fence(int win);

/* MPI_Put / MPI_Get of len bytes at byte offset disp of peer's window. */
int ngm_put(int win, const void *buf, int len, int peer, long long disp);
int ngm_get(int win, void *buf, int len, int peer, long long disp);
/* MPI_Accumulate of count elements of dtype with op at byte offset disp. */
int ngm_accumulate(int win, const void *buf, int count, int dtype, int op, int peer,
                   long long disp);
/* MPI_Fetch_and_op of one element of dtype: *result receives the old value. */
int ngm_fetch_and_op(int win, const void *origin, void *result, int dtype, int op, int peer,
                     long long disp);

#ifdef __cplusplus
}
#endif
#endif
