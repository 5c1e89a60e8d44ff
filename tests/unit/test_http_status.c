/* The reason phrases (keel_http_reason): every code RFC 9110 section 15
 * defines has its phrase, and so do the registered ones in use (103, 421,
 * 425, 428, 429, 431, 451, 511, ...); http1 builds its status lines from
 * this one table. */
#include <criterion/criterion.h>

#include <string.h>

#include <keel/embed.h>

static const struct {
    int code;
    const char *reason;
} expected[] = {
    /* RFC 9110 15 */
    {100, "Continue"},
    {101, "Switching Protocols"},
    {200, "OK"},
    {201, "Created"},
    {202, "Accepted"},
    {203, "Non-Authoritative Information"},
    {204, "No Content"},
    {205, "Reset Content"},
    {206, "Partial Content"},
    {300, "Multiple Choices"},
    {301, "Moved Permanently"},
    {302, "Found"},
    {303, "See Other"},
    {304, "Not Modified"},
    {305, "Use Proxy"},
    {307, "Temporary Redirect"},
    {308, "Permanent Redirect"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {402, "Payment Required"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {406, "Not Acceptable"},
    {407, "Proxy Authentication Required"},
    {408, "Request Timeout"},
    {409, "Conflict"},
    {410, "Gone"},
    {411, "Length Required"},
    {412, "Precondition Failed"},
    {413, "Content Too Large"},
    {414, "URI Too Long"},
    {415, "Unsupported Media Type"},
    {416, "Range Not Satisfiable"},
    {417, "Expectation Failed"},
    {421, "Misdirected Request"},
    {422, "Unprocessable Content"},
    {426, "Upgrade Required"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {504, "Gateway Timeout"},
    {505, "HTTP Version Not Supported"},
    /* elsewhere in the registry */
    {103, "Early Hints"},
    {425, "Too Early"},
    {428, "Precondition Required"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {451, "Unavailable For Legal Reasons"},
    {511, "Network Authentication Required"},
};

Test(http_status, every_defined_code_has_its_phrase, .timeout = 10)
{
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        const char *got = keel_http_reason(expected[i].code);
        cr_expect(got != NULL && strcmp(got, expected[i].reason) == 0, "%d: '%s', expected '%s'",
                  expected[i].code, got ? got : "(null)", expected[i].reason);
    }
}

Test(http_status, unassigned_and_unused_codes_have_none, .timeout = 10)
{
    /* 306 and 418 are reserved "(Unused)" (RFC 9110 15.4.7, 15.5.19). */
    const int none[] = {0, 99, 199, 299, 306, 418, 499, 599, 600, 999, -1};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        const char *got = keel_http_reason(none[i]);
        cr_expect(got != NULL && got[0] == '\0', "%d: '%s', expected \"\"", none[i],
                  got ? got : "(null)");
    }
}

/* A status line holds the phrase verbatim (RFC 9112 4: reason-phrase =
 * 1*( HTAB / SP / VCHAR / obs-text )), so the table must too. */
Test(http_status, phrases_are_status_line_safe, .timeout = 10)
{
    for (int code = 100; code <= 599; code++) {
        const char *r = keel_http_reason(code);
        cr_assert_not_null(r, "%d", code);
        cr_expect(strlen(r) < 40, "%d: phrase longer than 40 bytes", code);
        for (const char *c = r; *c; c++)
            cr_expect(*c == ' ' || (*c > 0x20 && *c < 0x7f), "%d: byte 0x%02x in '%s'", code,
                      (unsigned char)*c, r);
    }
}
