/* The websocket module compiled into an embedding program (KEEL_LINKED,
 * examples/embed/embed_ws.c): the service table and its wrappers work the
 * same as between loaded modules. */
#define _GNU_SOURCE
#include "ws_test.h"

#ifdef KEEL_EXAMPLE_DIR
Test(ws_embed, echo_and_room, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"127.0.0.1:0", "2", NULL};
    kh_proc *p = kh_start_program(KEEL_EXAMPLE_DIR "/embed_ws", NULL, args, 1, 10000);
    unsigned port = kh_port(p, 0);
    wsc *e = wsc_open(port, "/echo", NULL);
    wsc_send_text(e, "embedded");
    wt_expect_text(p, e, "embedded");
    wsc *a = wsc_open(port, "/room", NULL), *b = wsc_open(port, "/room", NULL);
    kh_sleep_ms(100); /* both subscribed (on_open) */
    wsc_send_text(a, "hi all");
    wt_expect_text(p, a, "hi all");
    wt_expect_text(p, b, "hi all");
    wsc_close(a);
    wsc_close(b);
    wsc_close(e);
    wt_finish(p);
}
#endif
