/* Reason phrases: the one table of keel. The core uses it for its short
 * status bodies ("404 Not Found\n"), http1 builds its status lines from it
 * (through keel_http_reason), and an HTTP/2 module has no use for it (HTTP/2
 * carries no reason phrase, RFC 9113 8.3.2), which is why it lives here and
 * not in a protocol module.
 *
 * Every code RFC 9110 section 15 defines, and the other codes of the IANA
 * HTTP Status Code Registry that are in use, with the phrase the defining
 * document recommends. 306 and 418 are reserved ("(Unused)", RFC 9110
 * 15.4.7 and 15.5.19) and have none. */
#include <keel/keel.h>

/* clang-format off */
#define KL_REASONS(X)                                                 \
    X(100, "Continue")                        /* RFC 9110 15.2.1 */   \
    X(101, "Switching Protocols")             /* RFC 9110 15.2.2 */   \
    X(102, "Processing")                      /* RFC 2518 10.1 */     \
    X(103, "Early Hints")                     /* RFC 8297 2 */        \
    X(200, "OK")                              /* RFC 9110 15.3.1 */   \
    X(201, "Created")                         /* RFC 9110 15.3.2 */   \
    X(202, "Accepted")                        /* RFC 9110 15.3.3 */   \
    X(203, "Non-Authoritative Information")   /* RFC 9110 15.3.4 */   \
    X(204, "No Content")                      /* RFC 9110 15.3.5 */   \
    X(205, "Reset Content")                   /* RFC 9110 15.3.6 */   \
    X(206, "Partial Content")                 /* RFC 9110 15.3.7 */   \
    X(207, "Multi-Status")                    /* RFC 4918 11.1 */     \
    X(208, "Already Reported")                /* RFC 5842 7.1 */      \
    X(226, "IM Used")                         /* RFC 3229 10.4.1 */   \
    X(300, "Multiple Choices")                /* RFC 9110 15.4.1 */   \
    X(301, "Moved Permanently")               /* RFC 9110 15.4.2 */   \
    X(302, "Found")                           /* RFC 9110 15.4.3 */   \
    X(303, "See Other")                       /* RFC 9110 15.4.4 */   \
    X(304, "Not Modified")                    /* RFC 9110 15.4.5 */   \
    X(305, "Use Proxy")                       /* RFC 9110 15.4.6, deprecated */ \
    X(307, "Temporary Redirect")              /* RFC 9110 15.4.8 */   \
    X(308, "Permanent Redirect")              /* RFC 9110 15.4.9 */   \
    X(400, "Bad Request")                     /* RFC 9110 15.5.1 */   \
    X(401, "Unauthorized")                    /* RFC 9110 15.5.2 */   \
    X(402, "Payment Required")                /* RFC 9110 15.5.3 */   \
    X(403, "Forbidden")                       /* RFC 9110 15.5.4 */   \
    X(404, "Not Found")                       /* RFC 9110 15.5.5 */   \
    X(405, "Method Not Allowed")              /* RFC 9110 15.5.6 */   \
    X(406, "Not Acceptable")                  /* RFC 9110 15.5.7 */   \
    X(407, "Proxy Authentication Required")   /* RFC 9110 15.5.8 */   \
    X(408, "Request Timeout")                 /* RFC 9110 15.5.9 */   \
    X(409, "Conflict")                        /* RFC 9110 15.5.10 */  \
    X(410, "Gone")                            /* RFC 9110 15.5.11 */  \
    X(411, "Length Required")                 /* RFC 9110 15.5.12 */  \
    X(412, "Precondition Failed")             /* RFC 9110 15.5.13 */  \
    X(413, "Content Too Large")               /* RFC 9110 15.5.14 */  \
    X(414, "URI Too Long")                    /* RFC 9110 15.5.15 */  \
    X(415, "Unsupported Media Type")          /* RFC 9110 15.5.16 */  \
    X(416, "Range Not Satisfiable")           /* RFC 9110 15.5.17 */  \
    X(417, "Expectation Failed")              /* RFC 9110 15.5.18 */  \
    X(421, "Misdirected Request")             /* RFC 9110 15.5.20 */  \
    X(422, "Unprocessable Content")           /* RFC 9110 15.5.21 */  \
    X(423, "Locked")                          /* RFC 4918 11.3 */     \
    X(424, "Failed Dependency")               /* RFC 4918 11.4 */     \
    X(425, "Too Early")                       /* RFC 8470 5.2 */      \
    X(426, "Upgrade Required")                /* RFC 9110 15.5.22 */  \
    X(428, "Precondition Required")           /* RFC 6585 3 */        \
    X(429, "Too Many Requests")               /* RFC 6585 4 */        \
    X(431, "Request Header Fields Too Large") /* RFC 6585 5 */        \
    X(451, "Unavailable For Legal Reasons")   /* RFC 7725 3 */        \
    X(500, "Internal Server Error")           /* RFC 9110 15.6.1 */   \
    X(501, "Not Implemented")                 /* RFC 9110 15.6.2 */   \
    X(502, "Bad Gateway")                     /* RFC 9110 15.6.3 */   \
    X(503, "Service Unavailable")             /* RFC 9110 15.6.4 */   \
    X(504, "Gateway Timeout")                 /* RFC 9110 15.6.5 */   \
    X(505, "HTTP Version Not Supported")      /* RFC 9110 15.6.6 */   \
    X(506, "Variant Also Negotiates")         /* RFC 2295 8.1 */      \
    X(507, "Insufficient Storage")            /* RFC 4918 11.5 */     \
    X(508, "Loop Detected")                   /* RFC 5842 7.2 */      \
    X(510, "Not Extended")                    /* RFC 2774 7, historic */ \
    X(511, "Network Authentication Required") /* RFC 6585 6 */
/* clang-format on */

const char *keel_http_reason(int status)
{
    switch (status) {
#define KL_REASON_CASE(code, text)                                                                 \
    case code:                                                                                     \
        return text;
        KL_REASONS(KL_REASON_CASE)
#undef KL_REASON_CASE
    default:
        return "";
    }
}
