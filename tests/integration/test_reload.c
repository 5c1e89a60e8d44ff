/* Zero-downtime reload (SIGHUP), socket activation (LISTEN_FDS) and the
 * service manager's notifications (NOTIFY_SOCKET): docs/operations.md.
 *
 * After a reload the serving keel is a child of the one the test started,
 * not of the test: it is found through the pid file and killed at the end
 * of each test (reload_fini). */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/un.h>
#include <sys/wait.h>

/* ---- processes a reload started ---------------------------------------- */

static pid_t successors[16];
static int nsuccessors;

static void remember(pid_t pid)
{
    for (int i = 0; i < nsuccessors; i++)
        if (successors[i] == pid)
            return;
    if (nsuccessors < (int)(sizeof successors / sizeof *successors))
        successors[nsuccessors++] = pid;
}

static void reload_fini(void)
{
    for (int i = 0; i < nsuccessors; i++)
        kill(successors[i], SIGKILL);
    nsuccessors = 0;
    kh_cleanup_all();
}

/* Waits until the pid file names another process than `old`. */
static pid_t wait_new_pid(const char *path, pid_t old, int timeout_ms)
{
    pid_t pid;
    if (!KH_WAIT_UNTIL((pid = kh_read_pid(path)) > 0 && pid != old, timeout_ms))
        return 0;
    remember(pid);
    return pid;
}

static int alive(pid_t pid)
{
    return kill(pid, 0) == 0;
}

static int wait_gone(pid_t pid, int timeout_ms)
{
    return KH_WAIT_UNTIL(!alive(pid), timeout_ms);
}

static void write_config(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

#define CONFIG(workers, extra)                                                                     \
    "[keel]\n"                                                                                     \
    "listen = 127.0.0.1:0 http1\n"                                                                 \
    "workers = " workers "\n"                                                                      \
    "modules = http1 hello\n"                                                                      \
    "pid_file = keel.pid\n" KH_MODULE_PATH extra

static kh_proc *start_keel(const char *config, char *pid_path, size_t size)
{
    kh_proc *p = kh_start(config, NULL, 1, 10000);
    snprintf(pid_path, size, "%s/keel.pid", p->dir);
    kh_assert(p, KH_WAIT_UNTIL(kh_read_pid(pid_path) == p->pid, 5000),
              "the pid file %s does not name keel (%d)", pid_path, (int)p->pid);
    return p;
}

/* ---- the hand-over ------------------------------------------------------ */

Test(reload, sighup_hands_the_sockets_over, .timeout = 60, .fini = reload_fini)
{
    char pid_path[400];
    kh_proc *p = start_keel(CONFIG("2", ""), pid_path, sizeof pid_path);
    unsigned port = kh_port(p, 0);
    kh_assert(p, kh_get_ok(port, "/"), "keel does not serve before the reload");

    kh_signal(p, SIGHUP);
    pid_t next = wait_new_pid(pid_path, p->pid, 10000);
    kh_assert(p, next > 0, "no new process wrote the pid file");
    kh_assert(p, kh_wait_log(p, "reload: new process", 10000), "no hand-over logged");
    /* The old process drains and exits 0; the new one serves the same
     * port (the socket was handed down, not bound again). */
    int status = kh_wait_exit(p, 10000);
    kh_assert(p, status == 0, "the old process exited with %d", status);
    kh_assert(p, alive(next), "the new process is gone");
    for (int i = 0; i < 20; i++)
        kh_assert(p, kh_get_ok(port, "/"), "request %d after the reload failed", i);
    kh_assert(p, kh_count_log(p, "listening on 127.0.0.1:") == 2,
              "the new process listened elsewhere");

    /* A second reload from the new process works the same way. */
    kill(next, SIGHUP);
    pid_t third = wait_new_pid(pid_path, next, 10000);
    kh_assert(p, third > 0 && wait_gone(next, 10000), "the second reload did not hand over");
    kh_assert(p, kh_get_ok(port, "/"), "no answer after the second reload");

    /* Stopped for good, the last one removes its pid file. */
    kill(third, SIGTERM);
    kh_assert(p, wait_gone(third, 10000), "SIGTERM did not stop the last process");
    kh_assert(p, access(pid_path, F_OK) != 0, "the pid file outlived the last process");
}

Test(reload, a_failing_config_leaves_the_old_process_serving, .timeout = 60, .fini = reload_fini)
{
    char pid_path[400];
    kh_proc *p = start_keel(CONFIG("1", ""), pid_path, sizeof pid_path);
    unsigned port = kh_port(p, 0);

    write_config(p->conf, CONFIG("1", "no_such_key = 1\n"));
    kh_signal(p, SIGHUP);
    kh_assert(p, kh_wait_log(p, "reload failed", 10000), "the failed reload was not logged");
    kh_assert(p, kh_wait_log(p, "unknown key 'no_such_key'", 1000),
              "the new process's reason is not in the log");
    kh_assert(p, !kh_exited(p), "the old process stopped after a failed reload");
    kh_assert(p, kh_read_pid(pid_path) == p->pid, "the pid file changed after a failed reload");
    kh_assert(p, kh_get_ok(port, "/"), "the old process no longer serves");

    /* A module that cannot load fails the same way. */
    write_config(p->conf, "[keel]\n"
                          "listen = 127.0.0.1:0 http1\n"
                          "modules = http1 no_such_module\n"
                          "pid_file = keel.pid\n" KH_MODULE_PATH);
    kh_signal(p, SIGHUP);
    kh_assert(p, kh_wait_log_count(p, "reload failed", 2, 10000),
              "the second failed reload was not logged");
    kh_assert(p, kh_count_log(p, "reload failed") == 2, "more than two failed reloads logged");
    kh_assert(p, kh_get_ok(port, "/"), "the old process no longer serves");

    /* Fixed, the next reload goes through. */
    write_config(p->conf, CONFIG("1", ""));
    kh_signal(p, SIGHUP);
    kh_assert(p, wait_new_pid(pid_path, p->pid, 10000) > 0, "the fixed config did not reload");
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "the old process did not exit 0");
    kh_assert(p, kh_get_ok(port, "/"), "no answer after the reload");
}

/* A new process that neither serves nor fails within reload_timeout is
 * killed, and the old one serves on. */
Test(reload, a_new_process_too_slow_to_serve_is_stopped, .timeout = 60, .fini = reload_fini)
{
    char pid_path[400];
    kh_proc *p = start_keel(CONFIG("1", "reload_timeout = 1s\n"), pid_path, sizeof pid_path);
    unsigned port = kh_port(p, 0);
    write_config(p->conf, "[keel]\n"
                          "listen = 127.0.0.1:0 http1\n"
                          "workers = 1\n"
                          "modules = http1 hello slowload\n"
                          "pid_file = keel.pid\n"
                          "reload_timeout = 1s\n" KH_MODULE_PATH "[slowload]\n"
                          "delay = 30s\n");
    kh_signal(p, SIGHUP);
    kh_assert(p, kh_wait_log(p, "did not serve within 1000 ms", 10000),
              "the slow new process was not given up on");
    kh_assert(p, kh_wait_log(p, "ended by signal 9", 5000), "the slow new process was not killed");
    kh_assert(p, kh_get_ok(port, "/"), "the old process no longer serves");
    kh_assert(p, kh_read_pid(pid_path) == p->pid, "the pid file changed");
}

/* Stopped while its successor is still starting, keel stops that one
 * too: nothing is left running. */
Test(reload, stopping_during_a_reload_stops_the_new_process_too, .timeout = 60, .fini = reload_fini)
{
    char pid_path[400];
    kh_proc *p = start_keel(CONFIG("1", ""), pid_path, sizeof pid_path);
    write_config(p->conf, "[keel]\n"
                          "listen = 127.0.0.1:0 http1\n"
                          "workers = 1\n"
                          "modules = http1 hello slowload\n"
                          "pid_file = keel.pid\n" KH_MODULE_PATH "[slowload]\n"
                          "delay = 5s\n");
    kh_signal(p, SIGHUP);
    kh_assert(p, kh_wait_log(p, "slowload: loading", 10000), "the new process did not start");
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_log(p, "is stopped too", 5000), "the new process was not stopped");
    const char *line = strstr(kh_stderr(p), "new process (pid ");
    int child = line ? atoi(line + strlen("new process (pid ")) : 0;
    kh_assert(p, child > 0, "no pid in the log");
    remember((pid_t)child);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "the old process did not exit 0");
    kh_assert(p, wait_gone((pid_t)child, 3000), "the new process (%d) is still running", child);
    kh_assert(p, access(pid_path, F_OK) != 0, "the pid file outlived both processes");
}

static int read_answer(int fd, char *buf, size_t size, int *close_after);

/* What is under way when the new process takes over: a request in
 * flight finishes on the old process; a keep-alive connection between
 * requests gets its next answer with Connection: close instead of a
 * reset ([http1] shutdown_idle_timeout); one that stays silent is closed
 * once that time is up. */
Test(reload, connections_in_flight_and_idle_finish_on_the_old_process, .timeout = 60,
     .fini = reload_fini)
{
    char pid_path[400];
    kh_proc *p =
        start_keel(CONFIG("1", "[http1]\nshutdown_idle_timeout = 3s\n"), pid_path, sizeof pid_path);
    unsigned port = kh_port(p, 0);
    char buf[4096];

    int busy = kh_connect("127.0.0.1", port);
    int idle = kh_connect("127.0.0.1", port);
    int silent = kh_connect("127.0.0.1", port);
    kh_assert(p, busy >= 0 && idle >= 0 && silent >= 0, "connect");
    kh_assert(p, kh_send_str(idle, "GET / HTTP/1.1\r\nHost: t\r\n\r\n") == 0, "send");
    size_t n = kh_recv_n(idle, buf, sizeof buf, 80, 5000);
    kh_assert(p, n > 12 && strncmp(buf, "HTTP/1.1 200", 12) == 0, "first answer: %s", buf);
    kh_recv_n(idle, buf, sizeof buf, sizeof buf - 1, 200); /* the rest of it */
    kh_assert(p, kh_send_str(busy, "GET /slow?ms=1500 HTTP/1.1\r\nHost: t\r\n\r\n") == 0, "send");
    kh_assert(p, kh_wait_peer_read(busy, 5000), "keel did not read the busy request");
    kh_assert(p, kh_wait_accepted(port, 5000), "keel did not accept the silent connection");

    kh_signal(p, SIGHUP);
    kh_assert(p, wait_new_pid(pid_path, p->pid, 10000) > 0, "no new process");
    kh_assert(p, kh_wait_log(p, "draining this one", 5000), "no hand-over logged");
    long long handed_over = kh_now_ms();

    /* Between requests when the hand-over came: answered, then closed.
     * The main thread logs the hand-over before the worker learns of the
     * drain, and nothing shows when it has: an answer may still come as
     * usual, so ask again until one says Connection: close. */
    int closes = 0;
    long long until = kh_now_ms() + 2000; /* within shutdown_idle_timeout */
    do {
        kh_assert(p, kh_send_str(idle, "GET / HTTP/1.1\r\nHost: t\r\n\r\n") == 0, "send");
        buf[0] = '\0';
        kh_assert(p, read_answer(idle, buf, sizeof buf, &closes),
                  "the idle connection's next request was not answered: '%s'", buf);
    } while (!closes && kh_now_ms() < until);
    kh_assert(p, closes, "no Connection: close in '%s'", buf);
    kh_assert(p, kh_expect_eof(idle, NULL, 0, 5000) == 1, "left open after Connection: close");

    /* In flight: its answer comes from the old process, which is still
     * there for it. */
    n = kh_recv_n(busy, buf, sizeof buf, sizeof buf - 1, 5000);
    kh_assert(p, n > 12 && strncmp(buf, "HTTP/1.1 200", 12) == 0,
              "the request in flight was lost: '%s'", buf);

    /* Silent: closed once shutdown_idle_timeout is over, not before. */
    kh_assert(p, kh_expect_eof(silent, NULL, 0, 10000) == 1, "the silent connection stayed open");
    long long closed_after = kh_now_ms() - handed_over;
    kh_assert(p, closed_after >= 2000,
              "the silent connection was closed %lld ms after the "
              "hand-over, before shutdown_idle_timeout (3s)",
              closed_after);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "the old process did not exit 0");
    close(busy);
    close(idle);
    close(silent);
}

/* systemd stops a unit by sending SIGTERM to each of its processes, the
 * one still draining after a reload included: that one goes on draining
 * gracefully rather than taking it as a second, forcing request. */
Test(reload, a_stop_signal_while_draining_keeps_the_drain_graceful, .timeout = 60,
     .fini = reload_fini)
{
    char pid_path[400];
    kh_proc *p = start_keel(CONFIG("1", ""), pid_path, sizeof pid_path);
    unsigned port = kh_port(p, 0);
    int busy = kh_connect("127.0.0.1", port);
    kh_assert(p, busy >= 0, "connect");
    kh_assert(p, kh_send_str(busy, "GET /slow?ms=1500 HTTP/1.1\r\nHost: t\r\n\r\n") == 0, "send");
    kh_assert(p, kh_wait_peer_read(busy, 5000), "keel did not read the busy request");
    kh_signal(p, SIGHUP);
    pid_t next = wait_new_pid(pid_path, p->pid, 10000);
    kh_assert(p, next > 0 && kh_wait_log(p, "draining this one", 5000), "no hand-over");
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_log(p, "already draining after a reload", 5000),
              "the SIGTERM was not taken as part of the drain");
    char buf[2048];
    size_t n = kh_recv_n(busy, buf, sizeof buf, sizeof buf - 1, 5000);
    kh_assert(p, n > 12 && strncmp(buf, "HTTP/1.1 200", 12) == 0,
              "the request in flight was cut by the SIGTERM: '%s'", buf);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "the old process did not exit 0");
    kh_assert(p, alive(next) && kh_get_ok(port, "/"), "the new process stopped serving");
    close(busy);
}

/* `keel -c FILE -s reload|stop`, as `nginx -s reload`: the running keel is
 * found through the config's pid_file. */
Test(reload, keel_s_reload_and_stop, .timeout = 60, .fini = reload_fini)
{
    char pid_path[400];
    kh_proc *p = start_keel(CONFIG("1", ""), pid_path, sizeof pid_path);
    unsigned port = kh_port(p, 0);
    const char *reload[] = {"-c", p->conf, "-s", "reload", NULL};
    kh_proc *ctl = kh_spawn_program(KEEL_BIN, NULL, reload);
    kh_assert(ctl, kh_wait_exit(ctl, 10000) == 0, "keel -s reload failed");
    pid_t next = wait_new_pid(pid_path, p->pid, 10000);
    kh_assert(p, next > 0, "keel -s reload did not reload");
    kh_assert(p, kh_wait_exit(p, 10000) == 0 && kh_get_ok(port, "/"), "the hand-over failed");

    const char *stop[] = {"-c", p->conf, "-s", "stop", NULL};
    ctl = kh_spawn_program(KEEL_BIN, NULL, stop);
    kh_assert(ctl, kh_wait_exit(ctl, 10000) == 0, "keel -s stop failed");
    kh_assert(p, wait_gone(next, 10000), "keel -s stop did not stop it");

    /* Nothing running any more: said, and a non-zero exit. */
    ctl = kh_spawn_program(KEEL_BIN, NULL, reload);
    kh_assert(ctl, kh_wait_exit(ctl, 10000) == 1, "keel -s reload with nothing running exited 0");
    kh_assert(ctl, strstr(kh_stderr(ctl), "no keel running") != NULL, "no reason given");
    /* A config without a pid file cannot name a process. */
    kh_proc *bare = kh_spawn("[keel]\nlisten = 127.0.0.1:0 http1\nmodules = http1\n" KH_MODULE_PATH,
                             (const char *[]){"-s", "stop", NULL});
    kh_assert(bare, kh_wait_exit(bare, 10000) == 1, "-s without a pid_file exited 0");
    kh_assert(bare, strstr(kh_stderr(bare), "pid_file") != NULL, "no reason given");
}

/* ---- no connection refused or reset under load --------------------------- */

typedef struct load {
    unsigned port;
    volatile int stop;
    int keepalive;
    long ok, failed;
    char last_error[160];
} load;

/* Requests answered so far by n clients (each thread writes its own). */
static long answered(load *loads, int n)
{
    long ok = 0;
    for (int i = 0; i < n; i++)
        ok += __atomic_load_n(&loads[i].ok, __ATOMIC_RELAXED);
    return ok;
}

/* Waits until the clients have had `more` answers since `since` (from the
 * process now serving); fails the test otherwise. Returns the new count. */
static long expect_answers(kh_proc *p, load *loads, int n, long since, long more)
{
    kh_assert(p, KH_WAIT_UNTIL(answered(loads, n) >= since + more, 10000),
              "only %ld answers in 10 s", answered(loads, n) - since);
    return answered(loads, n);
}

/* Reads one answer to a GET of hello's "/" (a Content-Length body):
 * 1 if it is a 200; *close says whether it ends the connection. */
static int read_answer(int fd, char *buf, size_t size, int *close_after)
{
    size_t n = 0;
    char *end = NULL;
    while ((end = strstr(buf, "\r\n\r\n")) == NULL) {
        size_t got = kh_recv_n(fd, buf + n, size - n, 1, 5000);
        if (got == 0 || n + got >= size - 1)
            return 0;
        n += got;
        buf[n] = '\0';
    }
    const char *cl = strstr(buf, "Content-Length: ");
    size_t body = cl ? (size_t)atol(cl + 16) : 0;
    size_t want = (size_t)(end + 4 - buf) + body;
    while (n < want) {
        size_t got = kh_recv_n(fd, buf + n, size - n, want - n, 5000);
        if (got == 0)
            return 0;
        n += got;
    }
    *close_after = strstr(buf, "Connection: close") != NULL;
    return strncmp(buf, "HTTP/1.1 200", 12) == 0;
}

static void *load_run(void *arg)
{
    load *l = arg;
    char buf[2048];
    int fd = -1;
    while (!l->stop) {
        if (fd < 0 && (fd = kh_connect("127.0.0.1", l->port)) < 0) {
            l->failed++;
            snprintf(l->last_error, sizeof l->last_error, "connect: %s", strerror(errno));
            continue;
        }
        const char *req = l->keepalive ? "GET / HTTP/1.1\r\nHost: t\r\n\r\n"
                                       : "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
        int close_after = 1;
        buf[0] = '\0';
        if (kh_send_str(fd, req) != 0 || !read_answer(fd, buf, sizeof buf, &close_after)) {
            l->failed++;
            snprintf(l->last_error, sizeof l->last_error, "no answer (%s): %.60s", strerror(errno),
                     buf);
            close(fd);
            fd = -1;
            continue;
        }
        __atomic_fetch_add(&l->ok, 1, __ATOMIC_RELAXED);
        /* A Connection: close means a new connection next time, as any
         * HTTP client does. */
        if (!l->keepalive || close_after) {
            close(fd);
            fd = -1;
        }
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* Readiness across a reload: the sockets never stop being served, so a
 * balancer's probe must never see the old process's "draining" (the old
 * process stops accepting before it counts as stopping). */
static void *probe_run(void *arg)
{
    load *l = arg;
    char buf[1024];
    while (!l->stop) {
        int fd = kh_connect("127.0.0.1", l->port);
        if (fd < 0) {
            l->failed++;
            snprintf(l->last_error, sizeof l->last_error, "connect: %s", strerror(errno));
            continue;
        }
        size_t n = 0;
        if (kh_send_str(fd, "GET /__ready HTTP/1.0\r\n\r\n") == 0)
            n = kh_recv_n(fd, buf, sizeof buf, sizeof buf - 1, 5000);
        close(fd);
        if (n < 12 || strncmp(buf, "HTTP/1.1 200", 12) != 0) {
            l->failed++;
            snprintf(l->last_error, sizeof l->last_error, "%.40s", n ? buf : "nothing");
        } else {
            __atomic_fetch_add(&l->ok, 1, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

Test(reload, readiness_stays_ready_across_reloads, .timeout = 60, .fini = reload_fini)
{
    char pid_path[400];
    const char *config = "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = 2\n"
                         "modules = http1 stats\npid_file = keel.pid\n" KH_MODULE_PATH;
    kh_proc *p = start_keel(config, pid_path, sizeof pid_path);
    load probes[2];
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        probes[i] = (load){.port = kh_port(p, 0)};
        pthread_create(&threads[i], NULL, probe_run, &probes[i]);
    }
    pid_t current = p->pid;
    long seen = 0;
    for (int r = 0; r < 4; r++) {
        seen = expect_answers(p, probes, 2, seen, 15); /* this process serves */
        kill(current, SIGHUP);
        pid_t next = wait_new_pid(pid_path, current, 10000);
        kh_assert(p, next > 0, "reload %d did not hand over", r + 1);
        current = next;
    }
    expect_answers(p, probes, 2, seen, 15);
    for (int i = 0; i < 2; i++) {
        probes[i].stop = 1;
        pthread_join(threads[i], NULL);
    }
    for (int i = 0; i < 2; i++)
        kh_assert(p, probes[i].failed == 0, "prober %d: %ld of %ld probes not 200; last: %s", i,
                  probes[i].failed, probes[i].ok + probes[i].failed, probes[i].last_error);
    kh_assert(p, probes[0].ok + probes[1].ok > 50, "too few probes");
}

Test(reload, no_request_fails_across_reloads_that_change_the_workers, .timeout = 90,
     .fini = reload_fini)
{
    char pid_path[400];
    kh_proc *p = start_keel(CONFIG("2", ""), pid_path, sizeof pid_path);
    unsigned port = kh_port(p, 0);
    load loads[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) {
        loads[i] = (load){.port = port, .keepalive = i % 2};
        pthread_create(&threads[i], NULL, load_run, &loads[i]);
    }
    /* 2 workers -> 3 -> 1 -> 2: the sockets handed down outnumber the
     * new process's workers, or fall short of them. */
    static const char *const workers[] = {"3", "1", "2"};
    pid_t current = p->pid;
    long seen = 0;
    for (int r = 0; r < 3; r++) {
        seen = expect_answers(p, loads, 4, seen, 30); /* this process serves */
        char config[1024];
        snprintf(config, sizeof config,
                 "[keel]\nlisten = 127.0.0.1:0 http1\nworkers = %s\nmodules = http1 hello\n"
                 "pid_file = keel.pid\n" KH_MODULE_PATH,
                 workers[r]);
        write_config(p->conf, config);
        kill(current, SIGHUP);
        pid_t next = wait_new_pid(pid_path, current, 10000);
        kh_assert(p, next > 0, "reload %d did not hand over", r + 1);
        current = next;
    }
    expect_answers(p, loads, 4, seen, 30);
    long ok = 0, failed = 0;
    for (int i = 0; i < 4; i++) {
        loads[i].stop = 1;
        pthread_join(threads[i], NULL);
        ok += loads[i].ok;
        failed += loads[i].failed;
    }
    for (int i = 0; i < 4; i++)
        kh_assert(p, loads[i].failed == 0, "client %d (%s): %ld failed of %ld; last: %s", i,
                  loads[i].keepalive ? "keep-alive" : "a connection each", loads[i].failed,
                  loads[i].ok + loads[i].failed, loads[i].last_error);
    kh_assert(p, ok > 100, "only %ld requests went through", ok);
    kh_assert(p, kh_get_ok(port, "/"), "the last process does not serve");
    /* An old process logs its hand-over when the new one says it serves,
     * which can come after the new pid file the loop waited for. */
    kh_assert(p, KH_WAIT_UNTIL(kh_count_log(p, "draining this one") >= 3, 10000),
              "not three hand-overs");
    kh_assert(p, kh_count_log(p, "draining this one") == 3, "more than three hand-overs");
}

/* ---- socket activation ---------------------------------------------------- */

/* A listening socket on 127.0.0.1 at an ephemeral port. */
static int listener(unsigned *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 16) == 0 &&
                  getsockname(fd, (struct sockaddr *)&a, &len) == 0,
              "listener: %s", strerror(errno));
    *port = ntohs(a.sin_port);
    return fd;
}

/* systemd's protocol (sd_listen_fds(3)), done by hand as systemd would:
 * the sockets at descriptors 3 and 4, LISTEN_FDS=2 and LISTEN_PID naming
 * keel itself (hence the exec from a shell that knows its own pid; bash,
 * as dash takes single-digit descriptors only). The
 * first matches the listen line and is served without keel binding
 * anything; the second matches none and is closed with a warning. */
Test(reload, adopts_sockets_from_a_service_manager, .timeout = 60, .fini = reload_fini)
{
    unsigned port, stray_port;
    int fd = listener(&port);
    int stray = listener(&stray_port);
    char config[1024], script[256];
    snprintf(
        config, sizeof config,
        "[keel]\nlisten = 127.0.0.1:%u http1\nworkers = 2\nmodules = http1 hello\n" KH_MODULE_PATH,
        port);
    /* The shell moves the sockets to 3 and 4 and execs keel with its own
     * pid in LISTEN_PID: the pid keel will have. */
    snprintf(script, sizeof script,
             "exec 3<&%d 4<&%d %d<&- %d<&-; LISTEN_PID=$$ LISTEN_FDS=2 exec \"$0\" \"$@\"", fd,
             stray, fd, stray);
    const char *args[] = {"-c", script, KEEL_BIN, "-c", NULL, NULL};
    /* The config goes to the harness's private directory through kh_spawn
     * of keel first would bind: write it beside the test's own files. */
    char dir[] = "/tmp/keel-activation-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL, "mkdtemp");
    char conf[300];
    snprintf(conf, sizeof conf, "%s/keel.conf", dir);
    write_config(conf, config);
    args[4] = conf;
    kh_proc *p = kh_start_program("/bin/bash", NULL, args, 1, 10000);
    close(fd);
    close(stray);

    kh_assert(p, kh_port(p, 0) == port, "keel listens on %u, not the inherited %u", kh_port(p, 0),
              port);
    kh_assert(p, kh_wait_log(p, "matches no listen line", 5000), "the stray socket was not noted");
    for (int i = 0; i < 10; i++)
        kh_assert(p, kh_get_ok(port, "/"), "request %d on the inherited socket failed", i);
    /* Closed by keel, the stray socket refuses connections. */
    kh_assert(p, kh_connect("127.0.0.1", stray_port) < 0, "the stray socket still accepts");
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "keel did not exit 0");
    unlink(conf);
    rmdir(dir);
}

/* ---- the service manager's notifications --------------------------------- */

static int notify_socket(char *path, size_t size)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(path, size, "/tmp/keel-notify-%d-%lld", (int)getpid(), kh_now_ms());
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "notify socket: %s",
              strerror(errno));
    return fd;
}

/* The next datagram, or "" after timeout_ms. */
static const char *next_notice(int fd, char *buf, size_t size, int timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t n = recv(fd, buf, size - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

Test(reload, tells_the_service_manager, .timeout = 60, .fini = reload_fini)
{
    char path[108], buf[256], expect[64];
    int fd = notify_socket(path, sizeof path);
    setenv("NOTIFY_SOCKET", path, 1);
    char pid_path[400];
    kh_proc *p = start_keel(CONFIG("1", ""), pid_path, sizeof pid_path);
    unsetenv("NOTIFY_SOCKET");

    snprintf(expect, sizeof expect, "MAINPID=%d\nREADY=1", (int)p->pid);
    kh_assert(p, strcmp(next_notice(fd, buf, sizeof buf, 5000), expect) == 0,
              "at start: '%s', expected '%s'", buf, expect);

    kh_signal(p, SIGHUP);
    kh_assert(p, strcmp(next_notice(fd, buf, sizeof buf, 5000), "RELOADING=1") == 0,
              "on SIGHUP: '%s'", buf);
    pid_t next = wait_new_pid(pid_path, p->pid, 10000);
    snprintf(expect, sizeof expect, "MAINPID=%d\nREADY=1", (int)next);
    kh_assert(p, strcmp(next_notice(fd, buf, sizeof buf, 5000), expect) == 0,
              "from the new process: '%s', expected '%s'", buf, expect);
    /* The old process drains without saying STOPPING=1: the service is
     * not stopping, its main process changed. */
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "the old process did not exit 0");
    kh_assert(p, next_notice(fd, buf, sizeof buf, 300)[0] == '\0', "the old process sent '%s'",
              buf);

    kill(next, SIGTERM);
    kh_assert(p, strcmp(next_notice(fd, buf, sizeof buf, 5000), "STOPPING=1") == 0,
              "on SIGTERM: '%s'", buf);
    kh_assert(p, wait_gone(next, 10000), "the new process did not stop");
    close(fd);
    unlink(path);
}
