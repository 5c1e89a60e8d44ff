/* The embedding examples: libkeel linked into a program (statically and as
 * a shared library) with the echo module compiled in, no dlopen, no config
 * file — configured in code and driven over real sockets. */
#include "harness.h"

#ifdef KEEL_EXAMPLE_DIR

static void check_embedded_echo(const char *program)
{
    const char *args[] = {"127.0.0.1:0", "2", NULL};
    kh_proc *p = kh_start_program(program, NULL, args, 1, 10000);
    kh_assert(p, strstr(kh_stderr(p), "[error]") == NULL, "no errors");
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    char buf[256];
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "hello from an embedded keel\n") == 0, "greeting, got '%s'", buf);
    kh_assert(p, kh_send_str(fd, "embedded\n") == 0, "send");
    kh_recv_line(fd, buf, sizeof buf, 5000);
    kh_assert(p, strcmp(buf, "embedded\n") == 0, "echo, got '%s'", buf);
    close(fd);
    kh_signal(p, SIGINT);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit on SIGINT");
    kh_assert(p, kh_count_log(p, "stopped: ") == 2, "both workers stopped");
    kh_stop(p);
}

Test(embed, static_libkeel_with_a_compiled_in_module, .timeout = 30)
{
    check_embedded_echo(KEEL_EXAMPLE_DIR "/embed_echo");
}

Test(embed, shared_libkeel_with_a_compiled_in_module, .timeout = 30)
{
    check_embedded_echo(KEEL_EXAMPLE_DIR "/embed_echo_shared");
}

Test(embed, http_server_with_a_route_table, .timeout = 30)
{
    const char *args[] = {"127.0.0.1:0", "2", NULL};
    kh_proc *p = kh_start_program(KEEL_EXAMPLE_DIR "/embed_http", NULL, args, 1, 10000);
    int fd = kh_connect("127.0.0.1", kh_port(p, 0));
    kh_assert(p, fd >= 0, "connect");
    kh_assert(p,
              kh_send_str(fd, "GET /users/7 HTTP/1.1\r\nHost: x\r\n\r\n"
                              "POST /upper HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                              "Connection: close\r\n\r\nabc") == 0,
              "send");
    char buf[2048];
    kh_assert(p, kh_expect_eof(fd, buf, sizeof buf, 5000) != 0, "two responses, then close");
    kh_assert(p, strstr(buf, "HTTP/1.1 200 OK") && strstr(buf, "\r\n\r\nuser 7\n"),
              "route parameter answered, got:\n%s", buf);
    kh_assert(p, strstr(buf, "\r\n\r\nABC"), "body route answered, got:\n%s", buf);
    close(fd);
    kh_signal(p, SIGTERM);
    kh_assert(p, kh_wait_exit(p, 10000) == 0, "clean exit");
    kh_stop(p);
}

/* An embedding program has no command line: what it set through
 * keel_server_set is named so, not "--set". */
Test(embed, errors_name_keel_server_set, .timeout = 30, .fini = kh_cleanup_all)
{
    const char *args[] = {"not-an-address", "1", NULL};
    kh_proc *p = kh_spawn_program(KEEL_EXAMPLE_DIR "/embed_echo", NULL, args);
    kh_assert(p, kh_wait_exit(p, 10000) != 0, "a bad address was taken");
    kh_assert(p, strstr(kh_stderr(p), "keel_server_set: [keel] listen") != NULL,
              "the call is not named");
    kh_assert(p, strstr(kh_stderr(p), "--set") == NULL, "labelled --set");
    kh_stop(p);
}

#else
Test(embed, examples_not_built)
{
    cr_skip_test("examples are not built (KEEL_BUILD_EXAMPLES=OFF)");
}
#endif
