/* The sandbox's runner and a root worker's uid switch, as one small static program (see
 * runner.py, which builds it, and bubblewrap.py's RUNNER, the shell script it replaces).
 *
 *   runner run RESULT EXPORT --seccomp=FD [--mask=NAME]... [--empty=NAME]...
 *              --cpu=N --as=N --fsize=N --nproc=N --nofile=N --core=N -- ARGV...
 *       Inside the sandbox, as its PID 1 (bubblewrap --as-pid-1: no reaper of bubblewrap's;
 *       this process reaps every orphan, and the program cannot signal it):
 *       0. before anything else runs: bind the /proc masks bubblewrap wrote into /run/masks
 *          (one mount each, read-only, in a mount namespace of its own), give up the two
 *          capabilities bubblewrap lent for that and every other (all sets checked empty),
 *          set no_new_privs and load the seccomp filter read from FD;
 *       1. copy the read-only /input folder into the working folder when there is one;
 *       2. run ARGV with its stdout joined to stderr, under the rlimits (hard = soft, set in
 *          the forked child only, so the runner itself can always report);
 *       3. kill every other process of the sandbox and reap them all (the runner itself is
 *          not dumpable: the program, of the same uid, cannot reach its memory or its result
 *          channel);
 *       4. report on stdout exactly as the shell runner does: the exit status (128 + n for a
 *          fatal signal n), then one letter for RESULT (F regular file and at most
 *          MAX_METRICS_BYTES + 1 bytes of it, L link, S special file, N none); with EXPORT,
 *          the letter ends with a line (F with the file's size) and tar's stream of EXPORT
 *          follows.
 *
 *   runner launch UID -- ARGV...
 *       On the host, for a root worker: become UID (real = effective = saved), gid UID, no
 *       supplementary groups, no capability in any set (inheritable and ambient cleared too),
 *       then execute ARGV (bubblewrap). The same as util-linux's
 *       `setpriv --reuid=UID --regid=UID --clear-groups --inh-caps=-all`.
 *
 * Built with -DMAX_METRICS_BYTES=... -DCOPY_FAILED=... -DINPUT_DIR="..." by runner.py. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_LIMITS 8
#define MAX_MASKS 64
#define MASKS_DIR "/run/masks"

struct limit {
    int resource;
    rlim_t value;
};

static const struct {
    const char *name;
    int resource;
} LIMIT_NAMES[] = {
    {"--cpu=", RLIMIT_CPU},     {"--as=", RLIMIT_AS},         {"--fsize=", RLIMIT_FSIZE},
    {"--nproc=", RLIMIT_NPROC}, {"--nofile=", RLIMIT_NOFILE}, {"--core=", RLIMIT_CORE},
};

static void fail(const char *what) {
    fprintf(stderr, "yoyaku runner: %s: %s\n", what, strerror(errno));
    exit(126);
}

static void usage(void) {
    fputs("yoyaku runner: bad arguments\n", stderr);
    exit(126);
}

static int write_all(int fd, const char *data, size_t size) {
    while (size > 0) {
        ssize_t written = write(fd, data, size);
        if (written < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        data += written;
        size -= (size_t)written;
    }
    return 0;
}

/* The report, written on the result channel in one piece (the worker wakes up once). */
static char report[MAX_METRICS_BYTES + 64];
static size_t reported;

static void say(const char *text) {
    size_t length = strlen(text);
    if (length > sizeof report - reported) length = sizeof report - reported;
    memcpy(report + reported, text, length);
    reported += length;
}

static void flush(void) {
    write_all(1, report, reported);
    reported = 0;
}

static int parse_limit(const char *arg, struct limit *out) {
    for (size_t i = 0; i < sizeof LIMIT_NAMES / sizeof LIMIT_NAMES[0]; i++) {
        size_t length = strlen(LIMIT_NAMES[i].name);
        if (strncmp(arg, LIMIT_NAMES[i].name, length) == 0) {
            char *end;
            errno = 0;
            unsigned long long value = strtoull(arg + length, &end, 10);
            if (errno || end == arg + length || *end) return -1;
            out->resource = LIMIT_NAMES[i].resource;
            out->value = (rlim_t)value;
            return 0;
        }
    }
    return -1;
}

/* Run ARGV (searched on PATH as the shell would) and wait for it; its exit status as the shell
 * reports one, or -1 when it could not be started. `stdout_to_stderr` joins its stdout to
 * stderr; `limits` are set in the child before it executes. */
static int run_and_wait(char **argv, int stdout_to_stderr, const struct limit *limits, int count) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (stdout_to_stderr && dup2(2, 1) < 0) _exit(126);
        for (int i = 0; i < count; i++) {
            struct rlimit value = {limits[i].value, limits[i].value};
            if (setrlimit(limits[i].resource, &value) != 0) {
                fprintf(stderr, "yoyaku runner: setting a limit: %s\n", strerror(errno));
                _exit(126);
            }
        }
        execvp(argv[0], argv);
        fprintf(stderr, "yoyaku runner: %s: %s\n", argv[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    /* As the sandbox's PID 1, every orphan is this process's child: reap them all. */
    int status;
    for (;;) {
        pid_t done = waitpid(-1, &status, 0);
        if (done == pid) break;
        if (done < 0 && errno != EINTR) return -1;
    }
    if (!WIFSIGNALED(status)) return WEXITSTATUS(status);
    /* As the shell says it, in the logs. */
    int signal = WTERMSIG(status);
    if (signal != SIGINT && signal != SIGPIPE)
        fprintf(stderr, "%s%s\n", strsignal(signal), WCOREDUMP(status) ? " (core dumped)" : "");
    return 128 + signal;
}

/* The letter for RESULT and, for a regular file, its bytes (at most MAX_METRICS_BYTES + 1);
 * with `sized`, the letter line of the export report (F with the size, or an empty size when
 * the file cannot be read, as the shell runner's `wc` reports it). */
static void report_result(const char *result, int sized) {
    struct stat status;
    if (lstat(result, &status) != 0) {
        say(sized ? "N\n" : "N");
        return;
    }
    if (S_ISLNK(status.st_mode)) {
        say(sized ? "L\n" : "L");
        return;
    }
    if (!S_ISREG(status.st_mode)) {
        say(sized ? "S\n" : "S");
        return;
    }
    int fd = open(result, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
        fprintf(stderr, "yoyaku runner: %s: %s\n", result, strerror(errno));
        say(sized ? "F\n" : "F");
        if (fd >= 0) close(fd);
        return;
    }
    char line[32];
    if (sized)
        snprintf(line, sizeof line, "F%lld\n", (long long)status.st_size);
    else
        snprintf(line, sizeof line, "F");
    say(line);
    size_t left = (size_t)MAX_METRICS_BYTES + 1;
    if (left > sizeof report - reported) left = sizeof report - reported;
    while (left > 0) {
        ssize_t got = read(fd, report + reported, left);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        reported += (size_t)got;
        left -= (size_t)got;
    }
    close(fd);
}

/* Bind SOURCE (on the read-only root) over TARGET, read-only. */
static void bind_read_only(const char *source, const char *target) {
    struct statvfs status;
    if (mount(source, target, NULL, MS_BIND, NULL) != 0) fail(target);
    if (statvfs(target, &status) == 0 && (status.f_flag & ST_RDONLY)) return;
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
    if (mount(NULL, target, NULL, flags, NULL) != 0 || statvfs(target, &status) != 0 ||
        !(status.f_flag & ST_RDONLY))
        fail(target);
}

/* The host-wide /proc figures hidden: each NAME of `masks` shows the file bubblewrap wrote at
 * MASKS_DIR/NAME (slashes as dashes), each of `empties` the empty folder MASKS_DIR/empty. The
 * mounts are made in a mount namespace of the sandbox's own user namespace (bubblewrap's
 * nested one cannot mount in the first), which the program then runs in. */
static void mask_proc(char **masks, int mask_count, char **empties, int empty_count) {
    if (mask_count + empty_count == 0) return;
    if (unshare(CLONE_NEWNS) != 0) fail("a mount namespace for the /proc masks");
    char source[256], target[256];
    for (int i = 0; i < mask_count + empty_count; i++) {
        const char *name = i < mask_count ? masks[i] : empties[i - mask_count];
        if (strstr(name, "..") || name[0] == '/' || strlen(name) > 200) usage();
        snprintf(target, sizeof target, "/proc/%s", name);
        if (i < mask_count) {
            snprintf(source, sizeof source, MASKS_DIR "/%s", name);
            for (char *c = source + strlen(MASKS_DIR) + 1; *c; c++)
                if (*c == '/') *c = '-';
        } else {
            snprintf(source, sizeof source, MASKS_DIR "/empty");
        }
        bind_read_only(source, target);
    }
}

/* Give up every capability (bubblewrap lent CAP_SYS_ADMIN and CAP_SETPCAP for the masks):
 * the bounding set, then every set, ambient included; checked. */
static void drop_capabilities(void) {
    for (int cap = 0; cap < 64; cap++) {
        int held = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
        if (held < 0) break; /* past the kernel's last capability */
        if (held && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) fail("dropping a capability");
    }
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &header, data) != 0) fail("clearing the capabilities");
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        fail("clearing the ambient capabilities");
    if (syscall(SYS_capget, &header, data) != 0) fail("reading the capabilities");
    for (int i = 0; i < 2; i++) {
        if (data[i].effective || data[i].permitted || data[i].inheritable) {
            errno = EPERM;
            fail("a capability is left");
        }
    }
    for (int cap = 0; cap < 64; cap++) {
        if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1) {
            errno = EPERM;
            fail("a capability is left in the bounding set");
        }
    }
}

/* The sandbox's seccomp filter (a BPF program read from FD), as `bwrap --seccomp` loads it. */
static void load_filter(int fd) {
    static struct sock_filter program[8192];
    size_t size = 0;
    for (;;) {
        ssize_t got = read(fd, (char *)program + size, sizeof program - size);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) fail("reading the seccomp filter");
        if (got == 0) break;
        size += (size_t)got;
        if (size == sizeof program) fail("reading the seccomp filter");
    }
    close(fd);
    if (size == 0 || size % sizeof program[0]) usage();
    struct sock_fprog filter = {(unsigned short)(size / sizeof program[0]), program};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("setting no_new_privs");
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter, 0, 0) != 0)
        fail("loading the seccomp filter");
}

static int run(int argc, char **argv) {
    if (argc < 6) usage();
    const char *result = argv[2], *export = argv[3];
    struct limit limits[MAX_LIMITS];
    char *masks[MAX_MASKS], *empties[MAX_MASKS];
    int count = 0, mask_count = 0, empty_count = 0, filter = -1, i = 4;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strncmp(argv[i], "--mask=", 7) == 0 && mask_count < MAX_MASKS)
            masks[mask_count++] = argv[i] + 7;
        else if (strncmp(argv[i], "--empty=", 8) == 0 && empty_count < MAX_MASKS)
            empties[empty_count++] = argv[i] + 8;
        else if (strncmp(argv[i], "--seccomp=", 10) == 0 && filter < 0)
            filter = atoi(argv[i] + 10);
        else if (count == MAX_LIMITS || parse_limit(argv[i], &limits[count++]) != 0)
            usage();
    }
    if (i + 1 >= argc || filter < 0) usage();
    char **program = argv + i + 1;
    /* Not dumpable: the program (same uid) can neither write this process's memory through
     * /proc/<pid>/mem nor open its result channel through /proc/<pid>/fd, so it cannot forge
     * the report. The program becomes dumpable again when it executes. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) fail("making the runner not dumpable");
    /* Before anything else runs: the masks, no capability left, the filter. */
    mask_proc(masks, mask_count, empties, empty_count);
    drop_capabilities();
    load_filter(filter);

    struct stat status;
    if (stat(INPUT_DIR, &status) == 0 && S_ISDIR(status.st_mode)) {
        char *copy[] = {"cp", "-R", INPUT_DIR "/.", ".", NULL};
        if (run_and_wait(copy, 0, NULL, 0) != 0) {
            fputs("yoyaku: the files do not fit in the sandbox\n", stderr);
            return COPY_FAILED;
        }
    }
    int rc = run_and_wait(program, 1, limits, count);
    if (rc < 0) fail("starting the program");
    kill(-1, SIGKILL);
    /* Every other process of the sandbox is this one's child (PID 1): once none is left,
     * nothing can change the result file while it is read. */
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR) {
    }
    char line[16];
    snprintf(line, sizeof line, "%d\n", rc);
    say(line);
    if (*export) {
        report_result(result, 1);
        flush();
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null >= 0) dup2(null, 2);
        char *tar[] = {"tar", "-C", (char *)export, "-cf", "-", ".", NULL};
        execvp(tar[0], tar);
        return 1;
    }
    report_result(result, 0);
    flush();
    return 0;
}

static int launch(int argc, char **argv) {
    if (argc < 5 || strcmp(argv[3], "--") != 0) usage();
    char *end;
    errno = 0;
    unsigned long id = strtoul(argv[2], &end, 10);
    if (errno || end == argv[2] || *end || id == 0 || id > 0xfffffffeUL) usage();
    uid_t uid = (uid_t)id;
    gid_t gid = (gid_t)id;
    if (setgroups(0, NULL) != 0) fail("clearing the groups");
    if (setresgid(gid, gid, gid) != 0) fail("changing the gid");
    if (setresuid(uid, uid, uid) != 0) fail("changing the uid");
    /* Leaving uid 0 cleared the permitted, effective and ambient sets; the inheritable set
     * would survive: clear every set explicitly, and the ambient one again. */
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &header, data) != 0) fail("clearing the capabilities");
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        fail("clearing the ambient capabilities");
    uid_t real, effective, saved;
    gid_t greal, geffective, gsaved;
    if (getresuid(&real, &effective, &saved) != 0 || real != uid || effective != uid ||
        saved != uid || getresgid(&greal, &geffective, &gsaved) != 0 || greal != gid ||
        geffective != gid || gsaved != gid || getgroups(0, NULL) != 0 || setuid(0) == 0) {
        errno = EPERM;
        fail("checking the new identity");
    }
    execv(argv[4], argv + 4);
    fail(argv[4]);
    return 126;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "run") == 0) return run(argc, argv);
    if (argc > 1 && strcmp(argv[1], "launch") == 0) return launch(argc, argv);
    usage();
    return 126;
}
