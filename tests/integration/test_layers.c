/* Transports and protocol hand-over, through the real binary: the rot13
 * test transport sits under the frozen "frozen" protocol (uppercase lines),
 * and the handover module switches a live connection between protocols. */
#include "harness.h"

#include <string.h>

static kh_proc *start(const char *modules, const char *listen)
{
    char conf[1024];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "workers = 2\nmodules = %s\nlisten = %s\n", modules, listen);
    return kh_start(conf, NULL, 1, 10000);
}

Test(layers, transport_decodes_input_and_encodes_output, .timeout = 30)
{
    kh_proc *p = start("rot13 frozen", "127.0.0.1:0 frozen rot13");
    kh_assert(p, strstr(kh_stderr(p), "(frozen, rot13)") != NULL, "listener names its transport");
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    /* "uryyb" is rot13("hello"): the protocol sees "hello", answers
     * "HELLO", and the transport encodes that as "URYYB". */
    kh_assert(p, kh_send_str(fd, "uryyb jbeyq\n") == 0, "send");
    char buf[256];
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "URYYB JBEYQ\n") == 0, "got '%s'", buf);
    /* An orderly close sends the transport's closing record first. */
    shutdown(fd, SHUT_WR);
    size_t n = kh_recv_n(fd, buf, sizeof buf, 8, 5000);
    kh_assert(p, n == 8 && memcmp(buf, "#pybfrq\n", 8) == 0, "closing record, got '%s'", buf);
    kh_assert(p, kh_expect_eof(fd, NULL, 0, 5000) == 1, "then EOF");
    close(fd);
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
    kh_stop(p);
}

Test(layers, unknown_transport_is_refused, .timeout = 30)
{
    char conf[512];
    snprintf(conf, sizeof conf,
             "[keel]\n" KH_MODULE_PATH "modules = frozen\nlisten = 127.0.0.1:0 frozen nosuch\n");
    kh_proc *p = kh_spawn(conf, NULL);
    kh_assert(p, kh_wait_exit(p, 10000) == 1, "exit 1");
    kh_assert(p, strstr(kh_stderr(p), "keel.conf:4: [keel] listen: unknown transport 'nosuch'"),
              "message names file, line and transport");
    kh_stop(p);
}

Test(layers, protocol_switch_keeps_buffered_bytes, .timeout = 30)
{
    kh_proc *p = start("handover", "127.0.0.1:0 lobby");
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    /* One write: the bytes after "upgrade" arrive in the same read as it
     * and must reach the new protocol. */
    kh_assert(p, kh_send_str(fd, "abc\nupgrade\nafter one\nafter two\n") == 0, "send");
    const char *want = "abc\nok\nAFTER ONE\nAFTER TWO\n";
    char buf[256];
    size_t n = kh_recv_n(fd, buf, sizeof buf, strlen(want), 5000);
    kh_assert(p, n == strlen(want) && strcmp(buf, want) == 0, "got '%s'", buf);
    kh_assert(p, kh_send_str(fd, "still shouting\n") == 0, "send");
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "STILL SHOUTING\n") == 0, "got '%s'", buf);
    close(fd);
    kh_stop(p);
}

Test(layers, protocol_switch_from_a_timer_while_paused, .timeout = 30)
{
    kh_proc *p = start("handover", "127.0.0.1:0 lobby");
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    kh_assert(p, kh_send_str(fd, "later\nqueued while paused\n") == 0, "send");
    const char *want = "ok\nQUEUED WHILE PAUSED\n";
    char buf[256];
    size_t n = kh_recv_n(fd, buf, sizeof buf, strlen(want), 5000);
    kh_assert(p, n == strlen(want) && strcmp(buf, want) == 0, "got '%s'", buf);
    close(fd);
    kh_stop(p);
}

/* ---- a transport that opens the protocol itself (ABI 1.4, ALPN) ------------ */

Test(layers, deferred_protocol_opens_after_the_handshake, .timeout = 30)
{
    kh_proc *p = start("rot13 frozen echo", "127.0.0.1:0 frozen gate");
    /* The listener's own protocol; the bytes behind the handshake line,
     * sent in the same write, reach it. */
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, kh_send_str(fd, "open -\nhello\n") == 0, "send");
    char buf[256];
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "HELLO\n") == 0, "got '%s'", buf);
    close(fd);
    /* Another registered protocol, chosen by the transport. */
    fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, kh_send_str(fd, "open echo\n") == 0, "send");
    kh_assert(p, kh_send_str(fd, "quiet please\n") == 0, "send");
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "quiet please\n") == 0, "got '%s' (not echo's answer)", buf);
    close(fd);
    /* An unknown one: answered and closed, nothing opened. */
    fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, kh_send_str(fd, "open nosuch\nhello\n") == 0, "send");
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "unknown nosuch\n") == 0, "got '%s'", buf);
    kh_assert(p, kh_expect_eof(fd, NULL, 0, 5000) == 1, "then EOF");
    close(fd);
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
    kh_stop(p);
}

Test(layers, deferred_protocol_times_out_and_stops_cleanly, .timeout = 30)
{
    kh_proc *p = start("rot13 frozen", "127.0.0.1:0 frozen gate");
    /* A stalled handshake is cut by the transport's timeout. */
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    long long t0 = kh_now_ms();
    kh_assert(p, kh_send_str(fd, "op") == 0, "send");
    kh_assert(p, kh_expect_eof(fd, NULL, 0, 5000) == 1, "not closed");
    long long took = kh_now_ms() - t0;
    kh_assert(p, took >= 800 && took < 4000, "closed after %lld ms, expected ~1000", took);
    close(fd);
    /* A graceful stop does not wait for a handshake in progress. */
    fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, kh_send_str(fd, "op") == 0, "send");
    kh_assert(p, kh_wait_peer_read(fd, 5000), "keel did not read the handshake's start");
    t0 = kh_now_ms();
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
    kh_assert(p, kh_now_ms() - t0 < 900, "the stop waited for the handshake");
    close(fd);
    kh_stop(p);
}
