/* A module that targets ABI 1.2 (KEEL_TARGET_ABI_MINOR), as one meant to
 * load on older hosts too would: its descriptor says 1.2, and the 1.3
 * entries are unavailable to it (tests/abi/check-target-minor.cmake proves
 * that a call does not compile). It must load and serve on this host:
 * "target12" answers each complete line with "1.2: " in front. */
#define KEEL_TARGET_ABI_MINOR 2
#include <keel/keel.h>

#include <string.h>

static int target12_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    static const char prefix[] = "1.2: ";
    char line[512];
    size_t at = 0;
    const char *nl;
    while ((nl = memchr(data + at, '\n', len - at)) != NULL) {
        size_t n = (size_t)(nl - (data + at)) + 1;
        if (n > sizeof line - (sizeof prefix - 1))
            return KEEL_ERR_LIMIT;
        memcpy(line, prefix, sizeof prefix - 1);
        memcpy(line + sizeof prefix - 1, data + at, n);
        int rc = keel_conn_write_copy(conn, line, sizeof prefix - 1 + n);
        if (rc < 0)
            return rc;
        at += n;
    }
    *consumed = at;
    return KEEL_OK;
}

static const keel_protocol target12_protocol = {
    .size = sizeof(keel_protocol),
    .name = "target12",
    .on_data = target12_data,
};

static int target12_load(keel_module *module)
{
    return keel_protocol_register(module, &target12_protocol);
}

KEEL_MODULE(target12, .version = "1.2.0", .load = target12_load);
