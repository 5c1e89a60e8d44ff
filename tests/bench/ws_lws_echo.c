/* ws_lws_echo.c — a libwebsockets echo server for tests/bench/ws.sh:
 * every message back as it came, one context (one thread).
 *
 *   ws_lws_echo PORT DEFLATE
 *
 * Build: cc -O2 ws_lws_echo.c -o ws_lws_echo $(pkg-config --cflags --libs libwebsockets)
 */
#include <libwebsockets.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MSG (1 << 20)

struct pss {
    unsigned char *buf; /* LWS_PRE + message */
    size_t len;
    int binary, pending;
};

static volatile int stop;

static int echo_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                   size_t len)
{
    struct pss *p = user;
    switch (reason) {
    case LWS_CALLBACK_ESTABLISHED:
        p->buf = malloc(LWS_PRE + MAX_MSG);
        p->len = 0;
        break;
    case LWS_CALLBACK_RECEIVE:
        if (lws_is_first_fragment(wsi))
            p->len = 0;
        if (p->len + len > MAX_MSG)
            return -1;
        memcpy(p->buf + LWS_PRE + p->len, in, len);
        p->len += len;
        p->binary = lws_frame_is_binary(wsi);
        if (lws_is_final_fragment(wsi) && !lws_remaining_packet_payload(wsi)) {
            p->pending = 1;
            lws_callback_on_writable(wsi);
        }
        break;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        if (p->pending) {
            p->pending = 0;
            if (lws_write(wsi, p->buf + LWS_PRE, p->len,
                          p->binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT) < (int)p->len)
                return -1;
        }
        break;
    case LWS_CALLBACK_CLOSED:
        free(p->buf);
        p->buf = NULL;
        break;
    default:
        break;
    }
    return 0;
}

static struct lws_protocols protocols[] = {{"echo", echo_cb, sizeof(struct pss), 65536, 0, NULL, 0},
                                           {NULL, NULL, 0, 0, 0, NULL, 0}};

static const struct lws_extension extensions[] = {
    {"permessage-deflate", lws_extension_callback_pm_deflate,
     "permessage-deflate; client_no_context_takeover; client_max_window_bits"},
    {NULL, NULL, NULL}};

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = atoi(argv[1]);
    info.iface = "127.0.0.1";
    info.protocols = protocols;
    if (atoi(argv[2]))
        info.extensions = extensions;
    lws_set_log_level(LLL_ERR, NULL);
    struct lws_context *ctx = lws_create_context(&info);
    if (!ctx)
        return 1;
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    while (!stop && lws_service(ctx, 0) >= 0)
        ;
    lws_context_destroy(ctx);
    return 0;
}
