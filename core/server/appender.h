/* core/server/appender.h — files appended to by a background thread. */
#ifndef KEEL_CORE_APPENDER_H
#define KEEL_CORE_APPENDER_H

#include <keel/types.h>

/* Flushes and closes every appender the server opened (after unload). */
void kl_appenders_close(keel_server *server);

#endif
