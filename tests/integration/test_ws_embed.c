/* The websocket module compiled into an embedding program (KEEL_LINKED,
 * examples/embed/embed_ws.c): the service table and its wrappers work the
 * same as between loaded modules. */
#define _GNU_SOURCE
#include "ws_test.h"

#ifdef KEEL_EXAMPLE_DIR
/* A PING answered: the connection's websocket is open, its on_open (which
 * subscribes to the room) has run. */
static void expect_open(kh_proc *p, wsc *c)
{
    wsc_send(c, 1, 9, "open?", 5);
    wsc_frame f;
    int rc = wsc_read(c, &f, 5000);
    kh_assert(p, rc == 0 && f.op == 10, "no PONG: rc %d op %d", rc, f.op);
    wsc_frame_free(&f);
}

Test(ws_embed, echo_and_room, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"127.0.0.1:0", "2", NULL};
    kh_proc *p = kh_start_program(KEEL_EXAMPLE_DIR "/embed_ws", NULL, args, 1, 10000);
    unsigned port = kh_port(p, 0);
    wsc *e = wsc_open(port, "/echo", NULL);
    wsc_send_text(e, "embedded");
    wt_expect_text(p, e, "embedded");
    wsc *a = wsc_open(port, "/room", NULL), *b = wsc_open(port, "/room", NULL);
    expect_open(p, a);
    expect_open(p, b);
    wsc_send_text(a, "hi all");
    wt_expect_text(p, a, "hi all");
    wt_expect_text(p, b, "hi all");
    wsc_close(a);
    wsc_close(b);
    wsc_close(e);
    wt_finish(p);
}
#endif
