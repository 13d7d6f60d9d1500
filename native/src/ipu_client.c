/* ipu-client: a reference client of the IPU device ABI, doing what
 * libipu_user does with a real device: open ipuN and ipuN_ex, map the whole
 * of each (size from fstat), ATTACH, SET_IPU_ID, install SA_SIGINFO handlers
 * for signals 44..49, and report each signal with its si_int.
 *
 *   ipu-client [--dir /dev] [--ipu N] [--id ID] [--listen SECONDS]
 *       attach, then print every signal that arrives for SECONDS (default 10)
 *   ipu-client [--dir DIR] [--ipu N] --interactive
 *       map both BARs, then obey commands on stdin, one reply line each:
 *       attach | setid ID | mask BITS | unmask BITS | reset |
 *       buffer LEN | buffer-at ADDR LEN | unbuffer ID | bufread ID OFF LEN |
 *       bufwrite ID OFF HEX | exwrite OFF HEX | exread OFF LEN |
 *       wait COUNT MS | signals | quit
 *       Numbers are decimal, or hexadecimal with 0x; offsets and lengths
 *       outside the BAR or buffer, and malformed hex data, answer
 *       "error 22" (EINVAL) and touch nothing.
 *
 * Build: cc -I native/include -o ipu-client native/src/ipu_client.c */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ipufs/ipu.h"

#define MAX_SIGNALS 4096
#define MAX_BUFFERS 64

struct received { int sig, value, code, pid; };
static struct received received[MAX_SIGNALS];
static volatile sig_atomic_t n_received;
static int n_reported;

static void on_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    int i = n_received;
    if (i < MAX_SIGNALS) {
        received[i].sig = sig;
        received[i].value = info->si_int;
        received[i].code = info->si_code;
        received[i].pid = info->si_pid;
        n_received = i + 1;
    }
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case PCIE_IPU_EXCEPTION_SIG: return "PCIE_IPU_EXCEPTION_SIG";
    case PCIE_ICU_DR_SIG: return "PCIE_ICU_DR_SIG";
    case PCIE_HSPGS1E0_SIG: return "PCIE_HSPGS1E0_SIG";
    case PCIE_HSPGS1E1_SIG: return "PCIE_HSPGS1E1_SIG";
    case PCIE_HSPGS2E0_SIG: return "PCIE_HSPGS2E0_SIG";
    case PCIE_HSPGS2E1_SIG: return "PCIE_HSPGS2E1_SIG";
    default: return "?";
    }
}

static void install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (int sig = PCIE_IPU_EXCEPTION_SIG; sig <= PCIE_HSPGS2E1_SIG; sig++)
        sigaddset(&sa.sa_mask, sig);
    for (int sig = PCIE_IPU_EXCEPTION_SIG; sig <= PCIE_HSPGS2E1_SIG; sig++)
        if (sigaction(sig, &sa, NULL) != 0) { perror("sigaction"); exit(1); }
}

struct bar { int fd; size_t size; unsigned char *map; };

static struct bar map_bar(const char *path)
{
    struct bar b;
    b.fd = open(path, O_RDWR | O_CLOEXEC);
    if (b.fd < 0) { fprintf(stderr, "open %s: %s\n", path, strerror(errno)); exit(1); }
    /* Its length: where the nodes are character devices, stat says 0. */
    off_t size = lseek(b.fd, 0, SEEK_END);
    if (size < 0) { perror("lseek"); exit(1); }
    b.size = (size_t)size;
    b.map = mmap(NULL, b.size, PROT_READ | PROT_WRITE, MAP_SHARED, b.fd, 0);
    if (b.map == MAP_FAILED) { fprintf(stderr, "mmap %s: %s\n", path, strerror(errno)); exit(1); }
    return b;
}

static void report(FILE *out, int verbose)
{
    int upto = n_received;
    if (!verbose)
        fprintf(out, "signals");
    for (; n_reported < upto; n_reported++) {
        struct received *r = &received[n_reported];
        if (verbose)
            fprintf(out, "signal %d %s si_int %d si_code %d si_pid %d\n", r->sig,
                    signal_name(r->sig), r->value, r->code, r->pid);
        else
            fprintf(out, " %d:%d:%d", r->sig, r->value, r->code);
    }
    if (!verbose)
        fprintf(out, "\n");
    fflush(out);
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static int reply_errno(int rc)
{
    if (rc < 0) printf("error %d\n", errno);
    else printf("ok\n");
    return rc;
}

static void hex_out(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) printf("%02x", p[i]);
    printf("\n");
}

/* A whole token as a number: decimal, or hexadecimal after 0x. */
static int number(const char *text, unsigned long long *out)
{
    char *end;
    int hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    if (!*text || *text == '-') return 0;
    errno = 0;
    *out = strtoull(text, &end, hex ? 16 : 10);
    return errno == 0 && *end == '\0' && end != text + (hex ? 2 : 0);
}

/* The arguments after the command word: `count` numbers, then one hex
 * string when `hex` is given, and nothing more; 1 when all parse. */
static int arguments(const char *line, int count, unsigned long long *values, char *hex)
{
    static char copy[65536 + 256];
    snprintf(copy, sizeof copy, "%s", line);
    char *save, *token = strtok_r(copy, " \t\n", &save);  /* the command word */
    for (int i = 0; i < count; i++) {
        token = strtok_r(NULL, " \t\n", &save);
        if (!token || !number(token, &values[i])) return 0;
    }
    if (hex) {
        token = strtok_r(NULL, " \t\n", &save);
        if (!token || strlen(token) > 65535) return 0;
        strcpy(hex, token);
    }
    return strtok_r(NULL, " \t\n", &save) == NULL;
}

/* Hex data of even length, in bytes; -1 when malformed. */
static long hex_length(const char *hex)
{
    size_t n = strlen(hex);
    if (n % 2) return -1;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789abcdefABCDEF", hex[i])) return -1;
    return (long)(n / 2);
}

static void hex_in(const char *hex, unsigned char *p)
{
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned int b;
        sscanf(hex + 2 * i, "%2x", &b);
        p[i] = (unsigned char)b;
    }
}

/* Whether [offset, offset + length) lies within a region of `size` bytes. */
static int within(unsigned long long offset, unsigned long long length, unsigned long long size)
{
    return offset <= size && length <= size - offset;
}

static int interactive(struct bar *config, struct bar *exchange)
{
    unsigned char *buffers[MAX_BUFFERS + 1] = {0};
    unsigned long long lengths[MAX_BUFFERS + 1] = {0};
    static char line[65536 + 256], hex[65536];
    char word[64];
    unsigned long long v[4];
    while (fgets(line, sizeof line, stdin)) {
        if (sscanf(line, "%63s", word) != 1) continue;
        if (!strcmp(word, "attach")) {
            reply_errno(ioctl(config->fd, IPU_IOCTL_ATTACH, NULL));
        } else if (!strcmp(word, "setid") && sscanf(line, "%*s %63s", word) == 1 &&
                   number(word + (word[0] == '-'), &v[0])) {  /* an id may be negative */
            reply_errno(ioctl(config->fd, IPU_IOCTL_SET_IPU_ID, word[0] == '-' ? -(long)v[0] : (long)v[0]));
        } else if ((!strcmp(word, "mask") || !strcmp(word, "unmask")) && arguments(line, 1, v, NULL)) {
            uint64_t bits = v[0];
            int rc = ioctl(config->fd, word[0] == 'm' ? IPU_IOCTL_MASK_INTERRUPT : IPU_IOCTL_UNMASK_INTERRUPT, &bits);
            if (rc < 0) printf("error %d\n", errno); else printf("mask %llu\n", (unsigned long long)bits);
        } else if (!strcmp(word, "reset")) {
            int zero = 0;
            reply_errno(ioctl(config->fd, IPU_IOCTL_RESET, &zero));
        } else if ((!strcmp(word, "buffer") && arguments(line, 1, v + 1, NULL)) ||
                   (!strcmp(word, "buffer-at") && arguments(line, 2, v, NULL))) {
            unsigned char *mem = NULL;
            unsigned long long length = v[1];
            if (word[6] == '\0' && length > 0 && length <= (1ull << 30)) {
                mem = aligned_alloc(4096, (length + 4095) & ~4095ull);
                memset(mem, 0xa5, length);
                v[0] = (uintptr_t)mem;
            }
            struct ipufs_buffer arg = { .address = v[0], .length = length, .id = 0, .flags = 0 };
            if (word[6] == '\0' && !mem) {
                printf("error %d\n", EINVAL);  /* no such allocation */
            } else if (ioctl(config->fd, IPU_IOCTL_ATTACH_BUFFER, &arg) < 0) {
                printf("error %d\n", errno);
                free(mem);
            } else {
                if (arg.id <= MAX_BUFFERS) { buffers[arg.id] = mem; lengths[arg.id] = length; }
                printf("buffer %llu\n", (unsigned long long)arg.id);
            }
        } else if (!strcmp(word, "unbuffer") && arguments(line, 1, v, NULL)) {
            uint64_t id = v[0];
            reply_errno(ioctl(config->fd, IPU_IOCTL_DETACH_BUFFER, &id));
        } else if (!strcmp(word, "bufread") && arguments(line, 3, v, NULL)) {
            if (v[0] > MAX_BUFFERS || !buffers[v[0]] || !within(v[1], v[2], lengths[v[0]])) printf("error %d\n", EINVAL);
            else hex_out(buffers[v[0]] + v[1], v[2]);
        } else if (!strcmp(word, "bufwrite") && arguments(line, 2, v, hex)) {
            long n = hex_length(hex);
            if (v[0] > MAX_BUFFERS || !buffers[v[0]] || n < 0 || !within(v[1], (unsigned long long)n, lengths[v[0]]))
                printf("error %d\n", EINVAL);
            else { hex_in(hex, buffers[v[0]] + v[1]); printf("ok\n"); }
        } else if (!strcmp(word, "exwrite") && arguments(line, 1, v, hex)) {
            long n = hex_length(hex);
            if (n < 0 || !within(v[0], (unsigned long long)n, exchange->size)) printf("error %d\n", EINVAL);
            else { hex_in(hex, exchange->map + v[0]); printf("ok\n"); }
        } else if (!strcmp(word, "exread") && arguments(line, 2, v, NULL)) {
            if (!within(v[0], v[1], exchange->size)) printf("error %d\n", EINVAL);
            else hex_out(exchange->map + v[0], v[1]);
        } else if (!strcmp(word, "wait") && arguments(line, 2, v, NULL)) {
            for (unsigned long long waited = 0; (unsigned long long)n_received < v[0] && waited < v[1]; waited++)
                sleep_ms(1);
            report(stdout, 0);
        } else if (!strcmp(word, "signals")) {
            report(stdout, 0);
        } else if (!strcmp(word, "quit")) {
            break;
        } else {
            printf("error %d\n", EINVAL);
        }
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = "/dev";
    int ipu = 0, id = -1, is_interactive = 0;
    double listen = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--ipu") && i + 1 < argc) ipu = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--id") && i + 1 < argc) id = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--listen") && i + 1 < argc) listen = atof(argv[++i]);
        else if (!strcmp(argv[i], "--interactive")) is_interactive = 1;
        else { fprintf(stderr, "usage: %s [--dir DIR] [--ipu N] [--id ID] [--listen SECONDS | --interactive]\n", argv[0]); return 2; }
    }
    char path[4096];
    install_handlers();
    snprintf(path, sizeof path, "%s/ipu%d", dir, ipu);
    struct bar config = map_bar(path);
    snprintf(path, sizeof path, "%s/ipu%d_ex", dir, ipu);
    struct bar exchange = map_bar(path);
    printf("mapped ipu%d %zu bytes, ipu%d_ex %zu bytes\n", ipu, config.size, ipu, exchange.size);
    fflush(stdout);
    if (is_interactive)
        return interactive(&config, &exchange);

    if (ioctl(config.fd, IPU_IOCTL_ATTACH, NULL) != 0) { perror("ATTACH"); return 1; }
    if (id < 0) id = ipu;
    if (ioctl(config.fd, IPU_IOCTL_SET_IPU_ID, (long)id) != 0) { perror("SET_IPU_ID"); return 1; }
    printf("attached to ipu%d with id %d as pid %d; listening %.1f s\n", ipu, id, (int)getpid(), listen);
    fflush(stdout);
    for (long ms = 0; ms < (long)(listen * 1000); ms += 10) {
        sleep_ms(10);
        if (n_received > n_reported) report(stdout, 1);
    }
    report(stdout, 1);
    return 0;
}
