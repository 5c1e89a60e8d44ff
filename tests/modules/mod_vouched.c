/* vouched — keel_response_fields_addn (ABI 1.13) for
 * test_vouched_fields.c: the same fields added two ways, so that the
 * test can compare what a client receives.
 *
 * GET /name/... adds them one keel_response_header_add each; GET
 * /batch/... in one keel_response_fields_addn, as views out of one
 * buffer that is not NUL-terminated between them (as a proxy's parsed
 * upstream head lies), with tokens for some names, none for others.
 * Both answer BODY_LEN bytes of text/plain whose Content-Length is one
 * of the fields (a body filter such as deflate decides by it), and a
 * Keep-Alive field the core must take out. */
#include <keel/header_tokens.h>
#include <keel/keel.h>

#include <string.h>

#define BODY_LEN 600

static const struct {
    const char *name, *value;
    unsigned token; /* 1 + keel_header_token, or 0: not classified */
} fields[] = {
    {"Content-Type", "text/plain", KEEL_HDR_CONTENT_TYPE + 1},
    {"Content-Length", "600", KEEL_HDR_CONTENT_LENGTH + 1},
    {"Cache-Control", "no-cache", 0},
    {"X-Upstream", "a\tb c", KEEL_HDR_UNKNOWN + 1},
    {"Set-Cookie", "a=1", KEEL_HDR_SET_COOKIE + 1},
    {"Set-Cookie", "b=2", KEEL_HDR_SET_COOKIE + 1},
    {"x-lower-case", "", 0},
    {"Keep-Alive", "timeout=5", KEEL_HDR_KEEP_ALIVE + 1},
    {"ETag", "\"v1\"", KEEL_HDR_ETAG + 1},
};
#define NFIELDS (sizeof fields / sizeof fields[0])

static int batch(keel_response *res)
{
    char buf[512], *at = buf;
    keel_field views[NFIELDS];
    for (size_t i = 0; i < NFIELDS; i++) {
        size_t nl = strlen(fields[i].name), vl = strlen(fields[i].value);
        memcpy(at, fields[i].name, nl);
        at[nl] = ':';
        memcpy(at + nl + 1, fields[i].value, vl);
        at[nl + 1 + vl] = '\r';
        views[i] = (keel_field){{at, nl}, {at + nl + 1, vl}, NULL, 0, fields[i].token};
        at += nl + vl + 2;
    }
    return keel_response_fields_addn(res, views, NFIELDS, 0);
}

static int answer(keel_request *req, keel_response *res, void *ud)
{
    (void)ud;
    keel_str path = keel_request_path(req);
    int rc = KEEL_OK;
    if (path.len >= 7 && memcmp(path.ptr, "/batch/", 7) == 0)
        rc = batch(res);
    else
        for (size_t i = 0; i < NFIELDS && rc == KEEL_OK; i++)
            rc = keel_response_header_add(res, fields[i].name, fields[i].value);
    if (rc != KEEL_OK)
        return keel_response_send_status(res, 500);
    static char body[BODY_LEN];
    memset(body, 'v', sizeof body);
    return keel_response_send_copy(res, body, sizeof body);
}

static int vouched_load(keel_module *m)
{
    return keel_route_add(m, "GET", "/*", answer, NULL);
}

KEEL_MODULE(vouched, .version = "1.0.0", .load = vouched_load);
