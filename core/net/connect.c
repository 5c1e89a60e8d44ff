/* Outbound connections (keel_conn_connect). */
#include "net/conn.h"

int keel_conn_connect(keel_worker *w, const keel_connect_options *options, keel_connect **out)
{
    (void)w, (void)options;
    if (out != NULL)
        *out = NULL;
    return KEEL_ERR_UNSUPPORTED; /* TODO(issue 8): implement */
}

void keel_connect_cancel(keel_connect *connect)
{
    (void)connect;
}

const char *keel_conn_remote_host(keel_conn *conn)
{
    return conn->origin->remote_host;
}
