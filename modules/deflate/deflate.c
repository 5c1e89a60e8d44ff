/* deflate.c — the module: [deflate] config, the service, the HTTP filter.
 *
 * The only part of keel that links zlib. It publishes the compression
 * service (keel/deflate.h) for other modules (websocket's
 * permessage-deflate) and compresses HTTP responses (filter.c).
 */
#include <stdlib.h>

#include "kd.h"

static int deflate_load(keel_module *module)
{
    int64_t level, mem_level;
    int rc;
    /* Level 6 is zlib's own default (Z_DEFAULT_COMPRESSION): on text the
     * higher levels gain a percent or two for several times the CPU, the
     * lower ones lose more than that. memLevel 8 is zlib's default too:
     * 9 buys almost nothing for 128 KiB more per stream, and a caller
     * short of memory (a WebSocket with many idle peers) asks for less in
     * its params. */
    if ((rc = keel_config_int(module, "level", 6, 1, 9, &level)) < 0 ||
        (rc = keel_config_int(module, "mem_level", 8, 1, 9, &mem_level)) < 0)
        return rc;
    kd_set_defaults(&(kd_defaults){(int)level, (int)mem_level});
    return keel_service_publish(module, KEEL_DEFLATE_SERVICE, KEEL_DEFLATE_API_VERSION, &kd_api);
}

KEEL_MODULE(deflate, .version = "1.0.0", .load = deflate_load);
