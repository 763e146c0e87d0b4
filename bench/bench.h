/*
 * bench — larch-bench, a load generator for ZooKeeper-protocol servers.
 *
 * One run = one read ratio: connect the sessions, warm up, measure an interval,
 * drain what is in flight, close the sessions. Two drivers produce the load:
 *   raw  (bench/raw.c)  epoll threads speaking jute over non-blocking sockets
 *                       through proto/proto.h, closed or open loop;
 *   c    (bench/zkc.c)  the official C client, libzookeeper_mt's async API,
 *                       closed loop (built only when the library is found).
 * Both fill a struct bench_result; report.c prints it as a table row or a JSON
 * line. Latencies are recorded in nanoseconds (bench/hist.h).
 *
 * Threads: the driver's threads own their sessions, counters and histograms;
 * the main thread only flips the shared phase (bench_timeline) and merges the
 * per-thread results after the threads have stopped.
 */
#ifndef LARCH_BENCH_H
#define LARCH_BENCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h" /* base_mono_ns: every bench time is on it */
#include "bench/hist.h"
#include "proto/proto.h"

#define BENCH_VERSION "0.1.0"
#define BENCH_ROOT "/larch-bench"
#define BENCH_KEY_FMT BENCH_ROOT "/k%08u"
#define BENCH_PATH_MAX 64

/* ---- limits (every knob has one) ------------------------------------- */
#define BENCH_RATIOS_MAX 16
#define BENCH_SESSIONS_MAX 20000
#define BENCH_OUTSTANDING_MAX 100000
#define BENCH_THREADS_MAX 64
#define BENCH_KEYS_MAX 10000000u
#define BENCH_VALUE_SIZE_MAX 1000000u /* below jute.maxbuffer with headers */
#define BENCH_SECONDS_MAX 86400.0
#define BENCH_RATE_MAX 1e8
#define BENCH_OPEN_LOOP_OUTSTANDING 1000 /* default cap per session with --rate */
#define BENCH_DRAIN_S 10.0                /* bound on waiting for in-flight replies */
#define BENCH_ERR_SLOTS 160               /* error codes 0..-159 counted by code */

enum bench_read_op { BENCH_READ_GETDATA, BENCH_READ_EXISTS, BENCH_READ_GETCHILDREN };
enum bench_write_op { BENCH_WRITE_SETDATA, BENCH_WRITE_CREATE_DELETE };
enum bench_dist { BENCH_DIST_UNIFORM, BENCH_DIST_ZIPF };
enum bench_client { BENCH_CLIENT_RAW, BENCH_CLIENT_C };

struct bench_cfg {
    char host[256];
    uint16_t port;
    int sessions;
    int outstanding;        /* per session; the cap on in-flight requests */
    bool outstanding_set;
    int threads;
    double rate_per_s;      /* 0: closed loop */
    double read_pcts[BENCH_RATIOS_MAX];
    int read_pct_count;
    enum bench_read_op read_op;
    enum bench_write_op write_op;
    enum bench_dist dist;
    double zipf_theta;
    uint32_t keys;
    uint32_t value_size_bytes;
    bool watch;
    double warmup_s;
    double duration_s;
    int server_pid;         /* 0: server CPU not measured */
    char label[64];
    bool json;
    bool setup;             /* create the keys before the first run */
    bool cleanup;           /* delete them after the last run */
    enum bench_client client;
    char udp_host[64];      /* --udp: reads over larchd's UDP path (dataplane/UDP.md) */
    uint16_t udp_port;      /* 0: TCP */
    char dpdk_args[1024];   /* --dpdk: EAL's arguments; "" kernel sockets */
    char dpdk_src[64];      /* --dpdk-src: the bench port's IPv4 address */
    bool dpdk_hold;         /* --dpdk-hold: keep the port until the peer closes it */
    int32_t timeout_ms;     /* session timeout asked for in ConnectRequest */
    uint64_t seed;
};

/* ---- args.c ------------------------------------------------------------ */
enum { BENCH_ARGS_OK = 0, BENCH_ARGS_HELP = 1, BENCH_ARGS_VERSION = 2, BENCH_ARGS_ERROR = -1 };
void bench_cfg_defaults(struct bench_cfg *cfg);
/* Parses argv into cfg (after bench_cfg_defaults). On BENCH_ARGS_ERROR, err
 * holds one line naming the bad argument, e.g. "--read-ratio: '120' is not in
 * 0..100". Pure: no I/O. */
int bench_args_parse(struct bench_cfg *cfg, int argc, char **argv, char *err, size_t err_len);
const char *bench_usage(void);
const char *bench_read_op_name(enum bench_read_op op);
const char *bench_write_op_name(enum bench_write_op op);

/* ---- results ---------------------------------------------------------- */
struct bench_counts {
    uint64_t read_ok;
    uint64_t write_ok;
    uint64_t errors[BENCH_ERR_SLOTS]; /* indexed by -code */
    uint64_t errors_other;            /* codes outside 0..-159 */
    uint64_t notifications;           /* watch events received */
    uint64_t sessions_lost;           /* connections that failed mid-run */
};
void bench_counts_add(struct bench_counts *dst, const struct bench_counts *src);
void bench_counts_error(struct bench_counts *c, int32_t code);
uint64_t bench_counts_error_total(const struct bench_counts *c);
/* One finished operation of the measured interval: an error counted by its
 * code, or its latency (t0 to now) in all and in by_kind (the read or the
 * write histogram, as write says). */
void bench_record_op(struct bench_counts *c, struct bench_hist *all, struct bench_hist *by_kind,
                     bool write, int32_t err, uint64_t t0_ns, uint64_t now_ns);

struct bench_result {
    double read_pct;
    double duration_s;      /* measured interval, wall clock */
    double server_cpu_s;    /* < 0 when not measured */
    double bench_cpu_s;     /* this process, same interval */
    struct bench_counts counts;
    struct bench_hist all;  /* successful ops */
    struct bench_hist read;
    struct bench_hist write;
};
void bench_result_reset(struct bench_result *r, double read_pct);

/* ---- keys.c: key choice ------------------------------------------------ */
struct bench_rng {
    struct base_rng b; /* xoshiro256** (base/base.h) */
};
void bench_rng_seed(struct bench_rng *r, uint64_t seed);
uint64_t bench_rng_next(struct bench_rng *r);
double bench_rng_unit(struct bench_rng *r); /* uniform in [0, 1) */

/* Zipf over ranks 0..n-1 (rank 0 hottest) by Gray et al., "Quickly generating
 * billion-record synthetic databases" (SIGMOD '94), as YCSB does; theta in
 * (0, 1). Read-only after init, shared by all threads. */
struct bench_zipf {
    uint32_t n;
    double theta, alpha, zetan, eta;
};
void bench_zipf_init(struct bench_zipf *z, uint32_t n, double theta);
uint32_t bench_zipf_next(const struct bench_zipf *z, struct bench_rng *r);

/* What one request does, chosen from the workload. */
struct bench_keys {
    const struct bench_cfg *cfg;
    struct bench_zipf zipf; /* valid when cfg->dist is zipf */
};
void bench_keys_init(struct bench_keys *k, const struct bench_cfg *cfg);
uint32_t bench_keys_pick(const struct bench_keys *k, struct bench_rng *r);
bool bench_pick_read(double read_pct, struct bench_rng *r);
/* Key's path (BENCH_KEY_FMT) into buf, cut to len as snprintf does; its
 * whole length. */
size_t bench_key_path(char *buf, size_t len, uint32_t key);

/* ---- cpu.c ------------------------------------------------------------ */
/* utime+stime of every thread of pid from /proc/pid/stat, in seconds; -1 on error. */
double bench_proc_cpu_s(int pid);
double bench_self_cpu_s(void);

/* ---- timeline.c: the phases a run goes through ------------------------ */
enum bench_phase { BENCH_PHASE_WARMUP = 0, BENCH_PHASE_MEASURE = 1, BENCH_PHASE_DRAIN = 2 };
/* Sleeps through the warm-up, flips *phase to MEASURE, sleeps the interval,
 * flips it to DRAIN; samples server and own CPU at both flips into r. Returns
 * early (still ending in DRAIN) when alive(arg) turns false; -1 then. */
int bench_timeline(const struct bench_cfg *cfg, _Atomic int *phase, struct bench_result *r,
                   bool (*alive)(void *arg), void *arg);

/* ---- frames.c: request encoders shared by setup and the drivers --------- */
struct zk_wbuf;
void bench_put_connect(struct zk_wbuf *w, int32_t timeout_ms);
void bench_put_read(struct zk_wbuf *w, int32_t xid, enum bench_read_op op, const char *path,
                    bool watch);
void bench_put_setdata(struct zk_wbuf *w, int32_t xid, const char *path, const void *value,
                       uint32_t value_len);
void bench_put_create(struct zk_wbuf *w, int32_t xid, const char *path, const void *value,
                      uint32_t value_len);
void bench_put_delete(struct zk_wbuf *w, int32_t xid, const char *path);
void bench_put_children(struct zk_wbuf *w, int32_t xid, const char *path);
void bench_put_close(struct zk_wbuf *w, int32_t xid);
void bench_put_ping(struct zk_wbuf *w);
/* ZooKeeper's opcode of a read op. */
int32_t bench_read_opcode(enum bench_read_op op);
/* One anonymous UDP read datagram (dataplane/UDP.md), appended to w. */
void bench_put_udp_read(struct zk_wbuf *w, uint64_t request_id, enum bench_read_op op,
                        const char *path);

/* ---- setup.c: blocking client for setup and cleanup -------------------- */
/* A connected TCP socket (blocking, TCP_NODELAY, 30 s I/O timeouts) or -1. */
int bench_open_socket(const struct bench_cfg *cfg, char *err, size_t err_len);
/* Connects and completes the handshake on a blocking socket with I/O
 * timeouts; returns the fd or -1 with err filled. */
int bench_connect(const struct bench_cfg *cfg, char *err, size_t err_len);
/* Creates BENCH_ROOT and the keys with value_size bytes (existing keys get
 * their value rewritten). Returns 0 or -1 with err. */
int bench_setup(const struct bench_cfg *cfg, char *err, size_t err_len);
/* Deletes the keys, whatever else sits under BENCH_ROOT, and BENCH_ROOT. */
int bench_cleanup(const struct bench_cfg *cfg, char *err, size_t err_len);

/* ---- tcpw.c: the TCP write session of the UDP and DPDK drivers --------- */
/* One per driver thread, owned by it; non-blocking after the handshake. */
struct bench_tcpw {
    int fd;
    struct zk_wbuf out; /* frames not yet sent */
    size_t out_off;     /* how much of out is sent */
    uint8_t *in;        /* reply bytes not yet taken */
    size_t in_len, in_cap;
    int64_t last_send_ns, ping_ns;
};
typedef void (*bench_tcpw_done_fn)(void *arg, int32_t xid, int32_t err);
/* Connects and handshakes (blocking); 0, or -1 with err. */
int bench_tcpw_open(struct bench_tcpw *t, const struct bench_cfg *cfg, char *err, size_t err_len);
void bench_tcpw_close(struct bench_tcpw *t);
/* Queues a setData of value at path (xid >= 0 names it in the reply). */
void bench_tcpw_set(struct bench_tcpw *t, int32_t xid, const char *path, const void *value,
                    uint32_t value_len);
/* Sends what is queued (and a ping when due), then hands each reply that
 * arrived to done. 0, or -1 when the session broke. Never blocks. */
int bench_tcpw_pump(struct bench_tcpw *t, bench_tcpw_done_fn done, void *arg);

/* ---- drivers ----------------------------------------------------------- */
/* Each runs one read ratio and fills r; 0 on success, -1 with err. */
/* dpdk.c: the same from a DPDK port of the bench's own (--dpdk). */
int bench_dpdk_run(const struct bench_cfg *cfg, double read_pct, struct bench_result *r,
                   char *err, size_t err_len);
/* After the runs (--dpdk-hold): waits, at most 60 s, until the DPDK port's
 * link is down, the peer having closed it. 0, or -1 when it stayed up. */
int bench_dpdk_hold(void);
/* udp.c: reads over larchd's UDP read path (--udp), closed loop. */
int bench_udp_run(const struct bench_cfg *cfg, double read_pct, struct bench_result *r,
                  char *err, size_t err_len);
int bench_raw_run(const struct bench_cfg *cfg, double read_pct, struct bench_result *r,
                  char *err, size_t err_len);
int bench_zkc_run(const struct bench_cfg *cfg, double read_pct, struct bench_result *r,
                  char *err, size_t err_len);

/* ---- report.c ---------------------------------------------------------- */
void bench_report_header(FILE *out, const struct bench_cfg *cfg);
void bench_report_row(FILE *out, const struct bench_cfg *cfg, const struct bench_result *r);
void bench_report_json(FILE *out, const struct bench_cfg *cfg, const struct bench_result *r);

#endif /* LARCH_BENCH_H */
