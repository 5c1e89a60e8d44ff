/* core/server/appender.h — files appended to by a background thread. */
#ifndef KEEL_CORE_APPENDER_H
#define KEEL_CORE_APPENDER_H

#include <keel/types.h>

/* Has every appender open its file again under its name (SIGUSR1, after
 * a rotation renamed it), each on its writer thread before the lines that
 * wait: lines appended after this call go to the new file. A file that
 * cannot be opened is logged and the old one kept. Main thread. */
void kl_appenders_reopen(keel_server *server);

/* Flushes and closes every appender the server opened (after unload). */
void kl_appenders_close(keel_server *server);

#endif
