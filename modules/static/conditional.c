/* conditional.c — validators and conditional requests (RFC 9110 8.8, 13).
 *
 * The ETag is strong and made from what changes when the bytes do: the
 * modification time with its nanoseconds where the file system keeps them
 * (two writes within one second must not share a tag, which nginx's
 * seconds-only "mtime-size" allows) and the size, in hex, plus a suffix for
 * a precompressed variant (a different representation needs a different
 * tag, 8.8.3). The inode is left out on purpose: two servers behind one
 * balancer serving copies of the same tree must agree (Apache dropped it
 * from its default FileETag for that reason).
 *
 * Only GET and HEAD reach this module (the router answers the rest 405),
 * so the precondition order of 13.2.2 reduces to: If-Match, else
 * If-Unmodified-Since (412); If-None-Match, else If-Modified-Since (304).
 * The fields are asked for by their tokens (keel/header_tokens.h): a
 * request without them costs an integer compare a field each.
 */
#include "static.h"

#include <stdio.h>
#include <string.h>

/* Lower-case hex of v, no leading zeros ("0" for 0); returns the end. */
static char *put_hex(char *p, uint64_t v)
{
    char tmp[16];
    size_t n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v != 0);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

/* "MTIME.NSEC-SIZE[-CODING]" in hex, quoted. Written by hand rather than
 * with snprintf, which cost some 2,000 instructions a response (a third
 * of the module's share on small files, by callgrind). */
size_t st_etag(const st_info *info, const char *coding, char *buf, size_t size)
{
    char out[ST_ETAG_MAX + 64], *p = out;
    size_t clen = coding ? strlen(coding) : 0;
    if (clen > 32)
        return 0;
    *p++ = '"';
    p = put_hex(p, (uint64_t)info->mtime);
    *p++ = '.';
    p = put_hex(p, (uint64_t)(unsigned long)info->mtime_nsec);
    *p++ = '-';
    p = put_hex(p, info->size);
    if (coding) {
        *p++ = '-';
        memcpy(p, coding, clen);
        p += clen;
    }
    *p++ = '"';
    size_t n = (size_t)(p - out);
    if (n >= size)
        return 0;
    memcpy(buf, out, n);
    buf[n] = '\0';
    return n;
}

void st_file_validators(st_file *f)
{
    if (f->validators_ok)
        return;
    size_t etag_len = st_etag(&f->info, NULL, f->etag, sizeof f->etag);
    size_t date_len =
        keel_time_format(f->info.mtime, KEEL_TIME_HTTP, f->last_modified, sizeof f->last_modified);
    /* Made here, on the worker, once per file: a response adds both by
     * pointer. Either may stay NULL (out of memory): then both are set as
     * text, as for a file outside the cache. */
    keel_field_make("ETag", 4, f->etag, etag_len, &f->validator_fields[0]);
    keel_field_make("Last-Modified", 13, f->last_modified, date_len, &f->validator_fields[1]);
    f->validators_ok = 1;
}

/* ---- HTTP-date (5.6.7) ---------------------------------------------------- */

static int month_of(const char *s)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    for (int i = 0; i < 12; i++)
        if (memcmp(s, months + 3 * i, 3) == 0)
            return i + 1;
    return 0;
}

/* Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* One of 5.6.7's forms as a layout: d day, bbb month (strftime's %b), y
 * year, h i s the time's digits, _ a space or the day's digit (asctime),
 * ? any byte (the weekday); any other byte (",", "GMT") stands for itself.
 * f: day, month, year, hour, minute, second. */
enum { F_DAY, F_MON, F_YEAR, F_HOUR, F_MIN, F_SEC, F_COUNT };

static int date_fields(const char *s, size_t len, const char *layout, int f[F_COUNT])
{
    static const char letters[] = "dbyhis"; /* in F_ order */
    if (len != strlen(layout))
        return -1;
    memset(f, 0, F_COUNT * sizeof *f);
    for (size_t i = 0; i < len; i++) {
        char l = layout[i];
        if (l == '?' || (l == '_' && s[i] == ' '))
            continue;
        if (l == 'b') {
            if ((f[F_MON] = month_of(s + i)) == 0)
                return -1;
            i += 2;
            continue;
        }
        const char *field = l == '_' ? letters : memchr(letters, l, sizeof letters - 1);
        if (field == NULL) {
            if (s[i] != l)
                return -1;
            continue;
        }
        if (s[i] < '0' || s[i] > '9')
            return -1;
        f[field - letters] = f[field - letters] * 10 + (s[i] - '0');
    }
    return f[F_HOUR] < 24 && f[F_MIN] < 60 && f[F_SEC] <= 60 ? 0 : -1;
}

int st_http_date_parse(const char *s, size_t len, int64_t *out)
{
    int f[F_COUNT];
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    const char *comma = memchr(s, ',', len);
    if (comma != NULL && (size_t)(comma - s) == 3) {
        /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
        if (date_fields(s, len, "???, dd bbb yyyy hh:ii:ss GMT", f) != 0)
            return -1;
    } else if (comma != NULL) {
        /* obsolete RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" */
        const char *p = comma + 1;
        if (date_fields(p, len - (size_t)(p - s), " dd-bbb-yy hh:ii:ss GMT", f) != 0)
            return -1;
        /* Two-digit years: 7.1.1.1's 50-year rule, read simply. */
        f[F_YEAR] += f[F_YEAR] < 70 ? 2000 : 1900;
    } else if (date_fields(s, len, "??? bbb _d hh:ii:ss yyyy", f) != 0) {
        return -1; /* asctime: "Sun Nov  6 08:49:37 1994" */
    }
    if (f[F_DAY] < 1 || f[F_DAY] > 31)
        return -1;
    *out = days_from_civil(f[F_YEAR], f[F_MON], f[F_DAY]) * 86400 + f[F_HOUR] * 3600 +
           f[F_MIN] * 60 + f[F_SEC];
    return 0;
}

/* ---- entity-tag lists (8.8.3, 13.1.1, 13.1.2) ------------------------------ */

/* 1 if the list holds "*" or a tag equal to etag: weakly (W/ ignored on
 * either side) or strongly (a weak tag never matches). A malformed list
 * matches nothing. */
static int list_matches(keel_str v, const char *etag, int strong)
{
    size_t elen = strlen(etag);
    size_t i = 0;
    while (i < v.len) {
        char c = v.ptr[i];
        if (c == ' ' || c == '\t' || c == ',') {
            i++;
            continue;
        }
        if (c == '*')
            return 1;
        int weak = 0;
        if (c == 'W' && i + 1 < v.len && v.ptr[i + 1] == '/') {
            weak = 1;
            i += 2;
        }
        if (i >= v.len || v.ptr[i] != '"')
            return 0;
        const char *q = memchr(v.ptr + i + 1, '"', v.len - i - 1);
        if (q == NULL)
            return 0;
        size_t tlen = (size_t)(q - (v.ptr + i)) + 1;
        if (!(strong && weak) && tlen == elen && memcmp(v.ptr + i, etag, elen) == 0)
            return 1;
        i += tlen;
    }
    return 0;
}

int st_preconditions(keel_request *req, const char *etag, int64_t mtime)
{
    int64_t date;
    keel_str im = keel_request_header_token(req, KEEL_HDR_IF_MATCH);
    if (im.ptr != NULL) {
        if (!list_matches(im, etag, 1))
            return 412;
    } else {
        keel_str ius = keel_request_header_token(req, KEEL_HDR_IF_UNMODIFIED_SINCE);
        if (ius.ptr != NULL && st_http_date_parse(ius.ptr, ius.len, &date) == 0 && mtime > date)
            return 412;
    }
    keel_str inm = keel_request_header_token(req, KEEL_HDR_IF_NONE_MATCH);
    if (inm.ptr != NULL)
        return list_matches(inm, etag, 0) ? 304 : 0;
    keel_str ims = keel_request_header_token(req, KEEL_HDR_IF_MODIFIED_SINCE);
    if (ims.ptr != NULL && st_http_date_parse(ims.ptr, ims.len, &date) == 0 && mtime <= date)
        return 304;
    return 0;
}

/* 13.1.5: an entity-tag compared strongly, or a date equal to the
 * Last-Modified we would send (nginx compares for equality too). */
int st_if_range(keel_request *req, const char *etag, int64_t mtime)
{
    keel_str ir = keel_request_header_token(req, KEEL_HDR_IF_RANGE);
    if (ir.ptr == NULL)
        return 1;
    while (ir.len > 0 && (ir.ptr[0] == ' ' || ir.ptr[0] == '\t')) {
        ir.ptr++;
        ir.len--;
    }
    /* An entity-tag starts with '"' or "W/"; a date may start with 'W'
     * too (Wed), so the slash decides. */
    if (ir.len > 0 && (ir.ptr[0] == '"' || (ir.len > 1 && ir.ptr[0] == 'W' && ir.ptr[1] == '/'))) {
        size_t elen = strlen(etag);
        while (ir.len > 0 && (ir.ptr[ir.len - 1] == ' ' || ir.ptr[ir.len - 1] == '\t'))
            ir.len--;
        return ir.len == elen && memcmp(ir.ptr, etag, elen) == 0;
    }
    int64_t date;
    return st_http_date_parse(ir.ptr, ir.len, &date) == 0 && date == mtime;
}
