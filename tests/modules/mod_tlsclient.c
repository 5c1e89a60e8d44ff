/* tlsclient — outbound connections through the tls transport, and what
 * the "tls" service (keel/tls.h) reports, for test_tls_client.c.
 *
 * Protocol "tlsclient_ctl" takes one command a line:
 *
 *   CONNECT HOST PORT   opens a "tlsclient_probe" connection through
 *                       transport "tls"; once open it sends "ping\n" and
 *                       waits for the line back, then answers
 *                       "OK tls=1 version=V name=N subject=S echo=ping"
 *                       (the service's answers for the outbound
 *                       connection), or "ERR STATUS" from on_error, or
 *                       "CLOSED STATUS" if it closed before answering
 *   SELF                what the service says of this ctl connection:
 *                       "SELF tls=T version=V alpn=A sni=N subject=S"
 */
#include <keel/keel.h>
#include <keel/tls.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

KEEL_TLS_DEFINE

static keel_module *self;

struct ctl {
    keel_conn *conn; /* NULL once closed */
    int refs;
};

struct probe {
    struct ctl *ctl;
    int answered;
};

static const char *status_name(int status)
{
    switch (status) {
    case KEEL_OK:
        return "OK";
    case KEEL_ERR_IO:
        return "IO";
    case KEEL_ERR_CLOSED:
        return "CLOSED";
    case KEEL_ERR_TIMEOUT:
        return "TIMEOUT";
    case KEEL_ERR_REFUSED:
        return "REFUSED";
    case KEEL_ERR_NOTFOUND:
        return "NOTFOUND";
    default:
        return "OTHER";
    }
}

static void ctl_unref(struct ctl *ctl)
{
    if (--ctl->refs == 0)
        free(ctl);
}

static void answer(struct ctl *ctl, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line - 1)
        n = (int)strlen(line);
    line[n++] = '\n';
    if (ctl->conn != NULL)
        keel_conn_write_copy(ctl->conn, line, (size_t)n);
}

static const char *or_dash(const char *s)
{
    return s != NULL ? s : "-";
}

/* ---- the outbound probe ---------------------------------------------------- */

static int probe_open(keel_conn *conn, void *arg)
{
    keel_conn_set_data(conn, arg);
    return keel_conn_write_copy(conn, "ping\n", 5);
}

static int probe_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    struct probe *p = keel_conn_data(conn);
    const char *nl = memchr(data, '\n', len);
    *consumed = nl != NULL || p->answered ? len : 0;
    if (nl == NULL || p->answered)
        return KEEL_OK;
    char subject[512];
    if (keel_tls_peer_subject(conn, subject, sizeof subject) != KEEL_OK)
        strcpy(subject, "-");
    answer(p->ctl, "OK tls=%d version=%s name=%s subject=%s echo=%.*s", keel_tls_is_tls(conn),
           or_dash(keel_tls_version(conn)), or_dash(keel_tls_server_name(conn)), subject,
           (int)(nl - data), data);
    p->answered = 1;
    keel_conn_close(conn);
    return KEEL_OK;
}

static void probe_close(keel_conn *conn, int status)
{
    struct probe *p = keel_conn_data(conn);
    if (!p->answered)
        answer(p->ctl, "CLOSED %s", status_name(status));
    ctl_unref(p->ctl);
    free(p);
}

static void probe_error(keel_worker *w, int status, void *arg)
{
    struct probe *p = arg;
    (void)w;
    answer(p->ctl, "ERR %s", status_name(status));
    ctl_unref(p->ctl);
    free(p);
}

static const keel_protocol probe_protocol = {
    .size = sizeof(keel_protocol),
    .name = "tlsclient_probe",
    .on_open = probe_open,
    .on_data = probe_data,
    .on_close = probe_close,
};

/* ---- the ctl protocol ---------------------------------------------------------- */

static void command(struct ctl *ctl, char *line)
{
    char *args[4] = {0};
    int n = 0;
    for (char *tok = strtok(line, " "); tok != NULL && n < 4; tok = strtok(NULL, " "))
        args[n++] = tok;
    if (n == 3 && strcmp(args[0], "CONNECT") == 0) {
        struct probe *p = calloc(1, sizeof *p);
        if (p == NULL) {
            answer(ctl, "ERR NOMEM");
            return;
        }
        p->ctl = ctl;
        ctl->refs++;
        keel_connect_options o = {
            .size = sizeof o,
            .host = args[1],
            .port = (unsigned)strtoul(args[2], NULL, 10),
            .protocol = "tlsclient_probe",
            .arg = p,
            .timeout_ms = 5000,
            .transport = "tls",
            .on_error = probe_error,
        };
        int rc = keel_conn_connect(keel_conn_worker(ctl->conn), &o, NULL);
        if (rc != KEEL_OK) {
            answer(ctl, "REFUSED %s", status_name(rc));
            ctl_unref(ctl);
            free(p);
        }
    } else if (n == 1 && strcmp(args[0], "SELF") == 0) {
        char subject[512];
        if (keel_tls_peer_subject(ctl->conn, subject, sizeof subject) != KEEL_OK)
            strcpy(subject, "-");
        answer(ctl, "SELF tls=%d version=%s alpn=%s sni=%s subject=%s", keel_tls_is_tls(ctl->conn),
               or_dash(keel_tls_version(ctl->conn)), or_dash(keel_tls_alpn(ctl->conn)),
               or_dash(keel_tls_server_name(ctl->conn)), subject);
    } else {
        answer(ctl, "USAGE");
    }
}

static int ctl_open(keel_conn *conn, void *arg)
{
    (void)arg;
    struct ctl *ctl = calloc(1, sizeof *ctl);
    if (ctl == NULL)
        return KEEL_ERR_NOMEM;
    ctl->conn = conn;
    ctl->refs = 1;
    keel_conn_set_data(conn, ctl);
    return KEEL_OK;
}

static int ctl_data(keel_conn *conn, const char *data, size_t len, size_t *consumed)
{
    struct ctl *ctl = keel_conn_data(conn);
    size_t done = 0;
    const char *nl;
    while ((nl = memchr(data + done, '\n', len - done)) != NULL) {
        char line[256];
        size_t n = (size_t)(nl - (data + done));
        if (n > 0 && data[done + n - 1] == '\r')
            n--;
        if (n >= sizeof line)
            n = sizeof line - 1;
        memcpy(line, data + done, n);
        line[n] = '\0';
        command(ctl, line);
        done = (size_t)(nl - data) + 1;
    }
    *consumed = done;
    return KEEL_OK;
}

static void ctl_close(keel_conn *conn, int status)
{
    struct ctl *ctl = keel_conn_data(conn);
    (void)status;
    ctl->conn = NULL;
    ctl_unref(ctl);
}

static const keel_protocol ctl_protocol = {
    .size = sizeof(keel_protocol),
    .name = "tlsclient_ctl",
    .on_open = ctl_open,
    .on_data = ctl_data,
    .on_close = ctl_close,
};

static int tlsclient_load(keel_module *m)
{
    self = m;
    int rc = keel_tls_bind(m);
    if (rc != KEEL_OK)
        return rc;
    if ((rc = keel_protocol_register(m, &probe_protocol)) != KEEL_OK)
        return rc;
    return keel_protocol_register(m, &ctl_protocol);
}

static const char *const deps[] = {"tls", NULL};

KEEL_MODULE(tlsclient, .version = "1.0.0", .dependencies = deps, .load = tlsclient_load);
