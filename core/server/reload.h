/* core/server/reload.h — zero-downtime reload and what a serving process
 * tells the world: on SIGHUP keel starts its successor with the listening
 * sockets handed down (net/inherit.h), and drains once the successor
 * serves; a serving process writes its pid file and tells the service
 * manager (sd_notify) and the process it replaces. POSIX only: on Windows
 * keel_server_enable_reload says KEEL_ERR_UNSUPPORTED. Main thread. */
#ifndef KEEL_CORE_RELOAD_H
#define KEEL_CORE_RELOAD_H

#include <keel/embed.h>

typedef struct kl_reload kl_reload;

/* SIGHUP: starts the successor unless one is starting already or the
 * server is stopping (each logged). */
void kl_reload_start(keel_server *server);

/* keel is stopping for good: a successor that does not serve yet is
 * stopped too (SIGTERM), or it would be left running after the stop. */
void kl_reload_cancel(keel_server *server);

/* Closes the reload's handles (the successor, if any, runs on). */
void kl_reload_close(keel_server *server);

/* Frees what keel_server_enable_reload kept. */
void kl_reload_free(keel_server *server);

/* This process serves: writes the pid file, sends READY=1 and MAINPID to
 * the service manager, and tells the process it replaces, if any.
 * KEEL_OK, or KEEL_ERR_IO if the pid file cannot be written (logged). */
int kl_reload_announce(keel_server *server);

/* At exit: removes the pid file if it still names this process. */
void kl_reload_exit(keel_server *server);

#endif
