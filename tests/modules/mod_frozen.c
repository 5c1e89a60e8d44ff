/* A protocol module compiled against the frozen v1.0 headers in
 * tests/abi/v1 (never against include/): "frozen" answers each complete line
 * uppercased. test_loader.c runs it on the current host, which proves that
 * the host still honours the ABI as it was released. */
#include <keel/keel.h>

#include <ctype.h>

static int frozen_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    size_t end = len;
    while (end > 0 && data[end - 1] != '\n')
        end--; /* a partial line waits for the rest */

    char out[512];
    for (size_t done = 0; done < end;) {
        size_t n = end - done < sizeof out ? end - done : sizeof out;
        for (size_t i = 0; i < n; i++)
            out[i] = (char)toupper((unsigned char)data[done + i]);
        int rc = keel_conn_write_copy(conn, out, n);
        if (rc < 0)
            return rc;
        done += n;
    }
    *consumed = end;
    return KEEL_OK;
}

static const keel_protocol frozen_protocol = {
    .size = sizeof(keel_protocol),
    .name = "frozen",
    .on_data = frozen_data,
};

static int frozen_load(keel_module *module)
{
    return keel_protocol_register(module, &frozen_protocol);
}

KEEL_MODULE(frozen, .version = "1.0.0", .load = frozen_load);
