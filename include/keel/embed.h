/* keel/embed.h — running keel inside a program of your own.
 *
 * Link libkeel (CMake: keel::keel or keel::keel_static; pkg-config:
 * libkeel), which defines KEEL_LINKED so that keel/api.h calls libkeel
 * directly. A minimal embedding program:
 *
 *     KEEL_MODULE_DECLARE(echo);          // compiled into this program
 *     int main(void) {
 *         keel_server *s = keel_server_new();
 *         keel_server_add_module(s, &keel_module_echo);
 *         keel_server_set(s, "keel.listen=127.0.0.1:8080 echo");
 *         int rc = keel_server_run(s);
 *         keel_server_free(s);
 *         return rc == KEEL_OK ? 0 : 1;
 *     }
 *
 * The keel_server_* functions are called from one thread, the "main" thread,
 * except keel_server_stop which any thread may call.
 */
#ifndef KEEL_EMBED_H
#define KEEL_EMBED_H

#include <stdio.h>

#include "api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a server with no configuration yet. NULL if out of memory. */
KEEL_EXPORT keel_server *keel_server_new(void);

/* Reads a config file. May be called once, before run; values set with
 * keel_server_set override it whatever the order. Returns KEEL_ERR_CONFIG
 * (with the reason logged as FILE:LINE) or KEEL_ERR_NOTFOUND. */
KEEL_EXPORT int keel_server_load_config_file(keel_server *server, const char *path);

/* Reads config text held in memory; `name` stands for the file name in
 * messages. Same rules as keel_server_load_config_file. The text is copied. */
KEEL_EXPORT int keel_server_load_config_string(keel_server *server, const char *text,
                                               const char *name);

/* Overrides one value: "section.key=value". For a repeatable key (such as
 * keel.listen) the first override replaces the file's values and further
 * overrides add to them. Returns KEEL_ERR_CONFIG for a malformed argument. */
KEEL_EXPORT int keel_server_set(keel_server *server, const char *assignment);

/* Registers a module compiled into the program: no file is loaded, the
 * descriptor is used as is. It is loaded in its place in the config's
 * `modules` list, or after the listed modules if the list does not name it.
 * The descriptor must outlive the server. */
KEEL_EXPORT int keel_server_add_module(keel_server *server, const keel_module_desc *desc);

/* Validates the configuration and loads every module (running their load
 * functions) without opening listeners or starting workers; then unloads.
 * What `keel -t` does: a config keel_server_run would refuse fails here
 * too (one without a listen line, an unknown [keel] user). Logs the
 * descriptor limit and what max_connections needs. The log stays on
 * stderr (a [keel] log file is only opened to see that it can be).
 * Returns KEEL_OK or the first error (logged). */
KEEL_EXPORT int keel_server_check(keel_server *server);

/* Prints the configuration keys the module `name` declares (ABI 1.7,
 * keel/config.h) to out: plain text, or with markdown non-zero the page
 * kept in docs/reference/NAME.md. The module is found as the config's
 * module_path says (or among those added with keel_server_add_module) and
 * not loaded. What `keel --help-module NAME` does; call it instead of
 * keel_server_run or keel_server_check, once, on the main thread. Returns
 * KEEL_OK, or the error that kept the module from being described
 * (logged). */
KEEL_EXPORT int keel_server_describe_module(keel_server *server, const char *name, int markdown,
                                            FILE *out);

/* Loads the modules, binds the listeners, starts the workers and runs until
 * a graceful shutdown (SIGINT/SIGTERM, Ctrl-C or console close on Windows,
 * or keel_server_stop) completes; on POSIX it also takes SIGUSR1 (reopen the
 * log files) and SIGUSR2 (ignored). Returns KEEL_OK after a clean shutdown,
 * otherwise the error that stopped start-up (already logged, naming its
 * cause). Can be called once per server.
 *
 * While it runs (and during keel_server_check), keel handles the fatal
 * signals SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT (on Windows: an
 * unhandled-exception filter and SIGABRT): it logs one line naming the
 * signal, the thread and the module whose code crashed, then hands the
 * signal to the handler that was installed before (the default: the
 * process dies by it). The previous handlers are restored when it
 * returns. A program with crash handling of its own opts out with
 * keel_server_set(server, "keel.crash_report=off"). */
KEEL_EXPORT int keel_server_run(keel_server *server);

/* Zero-downtime reload on SIGHUP (POSIX; KEEL_ERR_UNSUPPORTED on
 * Windows). When the running server gets SIGHUP it starts a new process
 * of this program, as its file is on disk then (an upgraded binary is
 * picked up), with argv (argv[0] included, NULL-terminated, copied here),
 * the same environment and working directory, and every listening socket
 * handed down; keel_server_run in the new process adopts them instead of
 * binding (the program does nothing for it). Once the new process serves,
 * this one stops accepting and shuts down gracefully, and its
 * keel_server_run returns KEEL_OK; if the new process fails to start (a
 * bad config, say: it logs why), or does not serve within
 * [keel] reload_timeout, this one logs it and serves on. Without this
 * call SIGHUP keeps its default disposition. Call before keel_server_run,
 * on the main thread. KEEL_OK, KEEL_ERR_INVAL (no argv[0]), KEEL_ERR_STATE
 * (already running or enabled), KEEL_ERR_NOMEM. docs/operations.md. */
KEEL_EXPORT int keel_server_enable_reload(keel_server *server, char *const argv[]);

/* Asks the keel that runs with this server's config (another process,
 * found through its [keel] pid_file) to "reload" (SIGHUP, as above) or to
 * "stop" (SIGTERM: a graceful shutdown), or to "reopen" its log files
 * (SIGUSR1, after a rotation), as `nginx -s reload` does. The
 * config must have been loaded; nothing is started here. Main thread.
 * KEEL_OK once the signal is sent; KEEL_ERR_INVAL (another action),
 * KEEL_ERR_CONFIG (no pid_file, or a config error: logged),
 * KEEL_ERR_NOTFOUND (no pid file, or no such process: logged),
 * KEEL_ERR_UNSUPPORTED on Windows. */
KEEL_EXPORT int keel_server_control(keel_server *server, const char *action);

/* Begins a graceful shutdown of a running server. Any thread, including
 * signal-free contexts such as another library's callback; a no-op if the
 * server is not running. */
KEEL_EXPORT void keel_server_stop(keel_server *server);

/* The port a listener actually bound (useful with port 0), by the
 * listener's index in config order, or 0 if it is not bound (yet). Any
 * thread. */
KEEL_EXPORT unsigned keel_server_listener_port(keel_server *server, unsigned index);

/* Frees a server that is not running. NULL is ignored. */
KEEL_EXPORT void keel_server_free(keel_server *server);

/* The folder of keel's shipped data (the welcome docroot is its www/):
 * share/keel beside the executable in a build tree, else the install's
 * share/keel relative to the executable's bin/ (so a relocated install
 * finds it). The string belongs to the server. Main thread. */
KEEL_EXPORT const char *keel_server_data_dir(keel_server *server);

/* The release version string, e.g. "0.1.0". */
KEEL_EXPORT const char *keel_version(void);

/* A short English description of a keel_status value. Never NULL. */
KEEL_EXPORT const char *keel_strerror(int status);

#ifdef __cplusplus
}
#endif

#endif
