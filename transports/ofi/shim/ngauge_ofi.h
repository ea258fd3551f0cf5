/*
 * ngauge_ofi.h: libfabric's static inline calls as real functions, so that Rust
 * can call them. Each ngo_X calls fi_X with the same arguments (the setup calls,
 * the data path, the completion queue); nothing is added or checked here.
 */
#ifndef NGAUGE_OFI_H
#define NGAUGE_OFI_H

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

struct fi_info *ngo_allocinfo(void);
int ngo_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain);
int ngo_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep);
int ngo_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq);
int ngo_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av);
int ngo_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags);
int ngo_enable(struct fid_ep *ep);
int ngo_getname(struct fid *fid, void *addr, size_t *addrlen);
int ngo_av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr);
int ngo_mr_reg(struct fid_domain *domain, const void *buf, size_t len, uint64_t access,
               uint64_t requested_key, struct fid_mr **mr);
void *ngo_mr_desc(struct fid_mr *mr);
uint64_t ngo_mr_key(struct fid_mr *mr);
int ngo_mr_bind(struct fid_mr *mr, struct fid *bfid);
int ngo_mr_enable(struct fid_mr *mr);
int ngo_close(struct fid *fid);
ssize_t ngo_cancel(struct fid *fid, void *context);

/* Messages: tagged (fi_t*) when `tagged`, else plain (fi_send/fi_recv, whose
 * `tag` is ignored and whose receives match by `addr`, FI_DIRECTED_RECV). */
ssize_t ngo_send(struct fid_ep *ep, int tagged, const void *buf, size_t len, void *desc,
                 fi_addr_t dest, uint64_t tag, void *context);
ssize_t ngo_inject(struct fid_ep *ep, int tagged, const void *buf, size_t len, fi_addr_t dest,
                   uint64_t tag);
ssize_t ngo_recv(struct fid_ep *ep, int tagged, void *buf, size_t len, void *desc,
                 fi_addr_t src, uint64_t tag, void *context);
ssize_t ngo_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc, uint64_t data,
                      fi_addr_t dest, uint64_t addr, uint64_t key, void *context);
ssize_t ngo_inject_writedata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
                             fi_addr_t dest, uint64_t addr, uint64_t key);

/* One-sided (`ngauge rma`): writes and sums of doubles with explicit completion
 * `flags` (fi_writemsg, fi_atomicmsg; FI_COMPLETION, FI_DELIVERY_COMPLETE), reads,
 * fetch-and-add of one u64 (fi_fetch_atomic, FI_SUM), the atomics the provider
 * has (fi_atomicvalid: elements per operation, or a negative error), and the
 * counter whose read drives a manual-progress provider. */
ssize_t ngo_write(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest,
                  uint64_t addr, uint64_t key, uint64_t flags, void *context);
ssize_t ngo_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t dest,
                 uint64_t addr, uint64_t key, void *context);
ssize_t ngo_sum_f64(struct fid_ep *ep, const double *buf, size_t count, void *desc,
                    fi_addr_t dest, uint64_t addr, uint64_t key, uint64_t flags, void *context);
ssize_t ngo_fetch_add_u64(struct fid_ep *ep, const uint64_t *one, void *desc, uint64_t *result,
                          void *result_desc, fi_addr_t dest, uint64_t addr, uint64_t key,
                          void *context);
ssize_t ngo_sum_valid(struct fid_ep *ep, int fetch, enum fi_datatype datatype);
int ngo_cntr_open(struct fid_domain *domain, struct fid_cntr **cntr);
uint64_t ngo_cntr_read(struct fid_cntr *cntr);

ssize_t ngo_cq_read(struct fid_cq *cq, struct fi_cq_tagged_entry *buf, size_t count);
ssize_t ngo_cq_sread(struct fid_cq *cq, struct fi_cq_tagged_entry *buf, size_t count,
                     int timeout_ms);
ssize_t ngo_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf);
const char *ngo_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data, char *buf,
                            size_t len);

/* SIGINT and SIGTERM back to their default actions (see ngauge_ofi::default_stop_signals). */
void ngo_default_stop_signals(void);

#endif
