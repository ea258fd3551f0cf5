/*
 * The floor ngauge's ping-pong is compared with: a minimal hand-written TCP/UDP
 * ping-pong on loopback, TCP_NODELAY on, no header bytes, each round trip timed on its
 * own, the pinging and answering processes pinned to two cores like ngauge's ranks.
 *
 *   pingpong -p tcp|udp -w block|spin -s BYTES -n REPS -W WARMUP -a CORE -b CORE
 *            [-T PINGER_RCVTIMEO_US] [-U ANSWER_RCVTIMEO_US] [-v [-H BYTES] [-t]] [-2]
 *
 * `block` uses blocking send/recv (sleep in the kernel), `spin` uses MSG_DONTWAIT in a
 * busy loop (ngauge's --wait poll). Experiment knobs, off by default (the floor has
 * none of them): -T/-U set SO_RCVTIMEO on the pinging/answering side's socket, -v
 * sends and receives UDP datagrams as ngauge does above 2 KiB, with sendmsg/recvmsg
 * and two iovecs (an 8-byte header, then the payload; -H sets the header's size, -t
 * puts it after the payload), -2 receives into a second buffer instead of the one it
 * sends from (as ngauge, OSU and perftest do). Prints one line:
 *   median_half_rtt_us=X min_half_rtt_us=Y reps=N
 * Build: cc -O2 -o pingpong pingpong.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int spin;
/* -v: header and payload as two iovecs (UDP only). */
static int two_iovecs;
/* -H BYTES: the header's size with -v (8 by default, at most 256); -t: the header
 * goes after the payload (a trailer), so the payload starts the datagram. */
static size_t header_len = 8;
static int trailer;
static char header[256];
/* -2: a separate receive buffer. */
static int two_buffers;

/* The two iovecs of -v: header then payload, or payload then trailer. */
static void two_parts(struct iovec *v, char *buf, size_t len) {
    struct iovec h = {header, header_len}, p = {buf, len};
    v[0] = trailer ? p : h;
    v[1] = trailer ? h : p;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void pin(int core) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        die("sched_setaffinity");
}

/* SO_RCVTIMEO of `us` microseconds (none when 0). */
static void receive_timeout(int fd, long us) {
    if (us <= 0)
        return;
    struct timeval tv = {us / 1000000, us % 1000000};
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv))
        die("SO_RCVTIMEO");
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* Whole message out (TCP may take it in pieces). */
static void send_all(int fd, const char *buf, size_t len) {
    size_t done = 0;
    int flags = MSG_NOSIGNAL | (spin ? MSG_DONTWAIT : 0);
    if (two_iovecs) {
        struct iovec v[2];
        two_parts(v, (char *)buf, len);
        struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};
        while (sendmsg(fd, &m, flags) < 0)
            if (errno != EAGAIN && errno != EINTR)
                die("sendmsg");
        return;
    }
    do {
        ssize_t n = send(fd, buf + done, len - done, flags);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            die("send");
        }
        done += (size_t)n;
    } while (done < len);
}

/* Whole message in; for UDP one datagram is the message. */
static void recv_all(int fd, char *buf, size_t len, int dgram) {
    size_t done = 0;
    int flags = spin ? MSG_DONTWAIT : 0;
    if (two_iovecs && dgram) {
        struct iovec v[2];
        two_parts(v, buf, len);
        struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};
        while (recvmsg(fd, &m, flags | MSG_TRUNC) < 0)
            if (errno != EAGAIN && errno != EINTR)
                die("recvmsg");
        return;
    }
    do {
        ssize_t n = recv(fd, buf + done, len - done, flags);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            die("recv");
        }
        if (n == 0 && !dgram)
            die("peer closed");
        done += (size_t)n;
        if (dgram)
            return;
    } while (done < len);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *proto = "tcp";
    size_t size = 1;
    long reps = 10000, warmup = 1000;
    int core_a = 0, core_b = 1, opt;
    long pinger_timeout_us = 0, answer_timeout_us = 0;
    while ((opt = getopt(argc, argv, "p:w:s:n:W:a:b:T:U:vH:t2")) != -1) {
        switch (opt) {
        case 'p': proto = optarg; break;
        case 'w': spin = strcmp(optarg, "spin") == 0; break;
        case 's': size = strtoul(optarg, 0, 10); break;
        case 'n': reps = strtol(optarg, 0, 10); break;
        case 'W': warmup = strtol(optarg, 0, 10); break;
        case 'a': core_a = atoi(optarg); break;
        case 'b': core_b = atoi(optarg); break;
        case 'T': pinger_timeout_us = strtol(optarg, 0, 10); break;
        case 'U': answer_timeout_us = strtol(optarg, 0, 10); break;
        case 'v': two_iovecs = 1; break;
        case 'H': header_len = strtoul(optarg, 0, 10); break;
        case 't': trailer = 1; break;
        case '2': two_buffers = 1; break;
        default:
            fprintf(stderr, "usage: %s -p tcp|udp -w block|spin -s BYTES -n REPS -W WARMUP -a CORE -b CORE [-T US] [-U US] [-v [-H BYTES] [-t]] [-2]\n", argv[0]);
            return 2;
        }
    }
    int udp = strcmp(proto, "udp") == 0;
    if (header_len < 1 || header_len > sizeof header) {
        fprintf(stderr, "-H takes 1 to %zu bytes\n", sizeof header);
        return 2;
    }
    if (reps < 1 || size < 1) {
        fprintf(stderr, "reps and size must be at least 1\n");
        return 2;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof addr;
    int one = 1, a, b = -1;
    char *buf = calloc(1, size);
    char *rbuf = two_buffers ? calloc(1, size) : buf;

    if (udp) {
        /* Two connected datagram sockets, one per process. */
        struct sockaddr_in aa = addr, bb = addr;
        a = socket(AF_INET, SOCK_DGRAM, 0);
        b = socket(AF_INET, SOCK_DGRAM, 0);
        if (bind(a, (void *)&aa, sizeof aa) || bind(b, (void *)&bb, sizeof bb))
            die("bind");
        getsockname(a, (void *)&aa, &alen);
        alen = sizeof bb;
        getsockname(b, (void *)&bb, &alen);
        if (connect(a, (void *)&bb, sizeof bb) || connect(b, (void *)&aa, sizeof aa))
            die("connect");
    } else {
        a = socket(AF_INET, SOCK_STREAM, 0);
        if (bind(a, (void *)&addr, sizeof addr) || listen(a, 1))
            die("listen");
        getsockname(a, (void *)&addr, &alen);
    }

    pid_t child = fork();
    if (child < 0)
        die("fork");
    if (child == 0) {
        /* The pinger: times every round trip. */
        pin(core_b);
        int fd;
        if (udp) {
            close(a);
            fd = b;
        } else {
            fd = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(fd, (void *)&addr, sizeof addr))
                die("connect");
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        receive_timeout(fd, pinger_timeout_us);
        double *t = malloc(sizeof(double) * (size_t)reps);
        for (long i = 0; i < warmup; i++) {
            send_all(fd, buf, size);
            recv_all(fd, rbuf, size, udp);
        }
        for (long i = 0; i < reps; i++) {
            double t0 = now_ns();
            send_all(fd, buf, size);
            recv_all(fd, rbuf, size, udp);
            t[i] = (now_ns() - t0) / 2e3;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp);
        double median = reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
        printf("median_half_rtt_us=%.3f min_half_rtt_us=%.3f reps=%ld\n", median, t[0], reps);
        fflush(stdout);
        close(fd);
        _exit(0);
    }
    /* The answering side. */
    pin(core_a);
    int fd;
    if (udp) {
        close(b);
        fd = a;
    } else {
        fd = accept(a, 0, 0);
        if (fd < 0)
            die("accept");
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    receive_timeout(fd, answer_timeout_us);
    for (long i = 0; i < warmup + reps; i++) {
        recv_all(fd, rbuf, size, udp);
        send_all(fd, buf, size);
    }
    int status;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
