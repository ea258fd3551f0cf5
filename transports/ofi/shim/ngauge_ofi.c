/* ngauge_ofi.c: see ngauge_ofi.h. */
#include "ngauge_ofi.h"

#include <signal.h>

struct fi_info *ngo_allocinfo(void) { return fi_allocinfo(); }

int ngo_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain) {
    return fi_domain(fabric, info, domain, NULL);
}

int ngo_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep) {
    return fi_endpoint(domain, info, ep, NULL);
}

int ngo_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq) {
    return fi_cq_open(domain, attr, cq, NULL);
}

int ngo_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av) {
    return fi_av_open(domain, attr, av, NULL);
}

int ngo_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags) {
    return fi_ep_bind(ep, bfid, flags);
}

int ngo_enable(struct fid_ep *ep) { return fi_enable(ep); }

int ngo_getname(struct fid *fid, void *addr, size_t *addrlen) {
    return fi_getname(fid, addr, addrlen);
}

int ngo_av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr) {
    return fi_av_insert(av, addr, count, fi_addr, 0, NULL);
}

int ngo_mr_reg(struct fid_domain *domain, const void *buf, size_t len, uint64_t access,
               uint64_t requested_key, struct fid_mr **mr) {
    return fi_mr_reg(domain, buf, len, access, 0, requested_key, 0, mr, NULL);
}

void *ngo_mr_desc(struct fid_mr *mr) { return fi_mr_desc(mr); }

uint64_t ngo_mr_key(struct fid_mr *mr) { return fi_mr_key(mr); }

int ngo_mr_bind(struct fid_mr *mr, struct fid *bfid) { return fi_mr_bind(mr, bfid, 0); }

int ngo_mr_enable(struct fid_mr *mr) { return fi_mr_enable(mr); }

int ngo_close(struct fid *fid) { return fi_close(fid); }

ssize_t ngo_cancel(struct fid *fid, void *context) { return fi_cancel(fid, context); }

ssize_t ngo_send(struct fid_ep *ep, int tagged, const void *buf, size_t len, void *desc,
                 fi_addr_t dest, uint64_t tag, void *context) {
    if (tagged) return fi_tsend(ep, buf, len, desc, dest, tag, context);
    return fi_send(ep, buf, len, desc, dest, context);
}

ssize_t ngo_inject(struct fid_ep *ep, int tagged, const void *buf, size_t len, fi_addr_t dest,
                   uint64_t tag) {
    if (tagged) return fi_tinject(ep, buf, len, dest, tag);
    return fi_inject(ep, buf, len, dest);
}

ssize_t ngo_recv(struct fid_ep *ep, int tagged, void *buf, size_t len, void *desc,
                 fi_addr_t src, uint64_t tag, void *context) {
    if (tagged) return fi_trecv(ep, buf, len, desc, src, tag, 0, context);
    return fi_recv(ep, buf, len, desc, src, context);
}

ssize_t ngo_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc, uint64_t data,
                      fi_addr_t dest, uint64_t addr, uint64_t key, void *context) {
    return fi_writedata(ep, buf, len, desc, data, dest, addr, key, context);
}

ssize_t ngo_inject_writedata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
                             fi_addr_t dest, uint64_t addr, uint64_t key) {
    return fi_inject_writedata(ep, buf, len, data, dest, addr, key);
}

ssize_t ngo_write(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest,
                  uint64_t addr, uint64_t key, uint64_t flags, void *context) {
    struct iovec iov = {(void *)buf, len};
    struct fi_rma_iov rma = {addr, len, key};
    struct fi_msg_rma msg = {&iov, &desc, 1, dest, &rma, 1, context, 0};
    return fi_writemsg(ep, &msg, flags);
}

ssize_t ngo_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t dest,
                 uint64_t addr, uint64_t key, void *context) {
    return fi_read(ep, buf, len, desc, dest, addr, key, context);
}

ssize_t ngo_sum_f64(struct fid_ep *ep, const double *buf, size_t count, void *desc,
                    fi_addr_t dest, uint64_t addr, uint64_t key, uint64_t flags, void *context) {
    struct fi_ioc ioc = {(void *)buf, count};
    struct fi_rma_ioc rma = {addr, count, key};
    struct fi_msg_atomic msg = {&ioc, &desc, 1, dest, &rma, 1, FI_DOUBLE, FI_SUM, context, 0};
    return fi_atomicmsg(ep, &msg, flags);
}

ssize_t ngo_fetch_add_u64(struct fid_ep *ep, const uint64_t *one, void *desc, uint64_t *result,
                          void *result_desc, fi_addr_t dest, uint64_t addr, uint64_t key,
                          void *context) {
    return fi_fetch_atomic(ep, one, 1, desc, result, result_desc, dest, addr, key, FI_UINT64,
                           FI_SUM, context);
}

ssize_t ngo_sum_valid(struct fid_ep *ep, int fetch, enum fi_datatype datatype) {
    size_t count = 0;
    int rc = fetch ? fi_fetch_atomicvalid(ep, datatype, FI_SUM, &count)
                   : fi_atomicvalid(ep, datatype, FI_SUM, &count);
    return rc ? (ssize_t)rc : (ssize_t)count;
}

int ngo_cntr_open(struct fid_domain *domain, struct fid_cntr **cntr) {
    struct fi_cntr_attr attr = {0};
    attr.events = FI_CNTR_EVENTS_COMP;
    attr.wait_obj = FI_WAIT_NONE;
    return fi_cntr_open(domain, &attr, cntr, NULL);
}

uint64_t ngo_cntr_read(struct fid_cntr *cntr) { return fi_cntr_read(cntr); }

ssize_t ngo_cq_read(struct fid_cq *cq, struct fi_cq_tagged_entry *buf, size_t count) {
    return fi_cq_read(cq, buf, count);
}

ssize_t ngo_cq_sread(struct fid_cq *cq, struct fi_cq_tagged_entry *buf, size_t count,
                     int timeout_ms) {
    return fi_cq_sread(cq, buf, count, NULL, timeout_ms);
}

ssize_t ngo_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf) {
    return fi_cq_readerr(cq, buf, 0);
}

const char *ngo_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data, char *buf,
                            size_t len) {
    return fi_cq_strerror(cq, prov_errno, err_data, buf, len);
}

void ngo_default_stop_signals(void) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
}
