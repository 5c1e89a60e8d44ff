/* h1_head_diff.h — one request head through http1's two head parsers,
 * compared: h1_fast_head (modules/http1/fast_head.c) and llhttp with the
 * checks of parse.c and validate.c (h1_llhttp_head), each on a worker and
 * exchange of its own. Shared by tests/unit/test_h1_fast_head.c and
 * tests/fuzz/fuzz_h1_head.c; needs the http1 module's sources compiled in.
 *
 * What must hold for any bytes: if the fast path takes a head, llhttp and
 * the checks take it too, ending at the same byte, with the same h1_exch
 * (request line, spans, tokens, Host, framing, persistence, expectations).
 * A head llhttp or a check refuses is therefore never the fast path's.
 */
#ifndef KEEL_TEST_H1_HEAD_DIFF_H
#define KEEL_TEST_H1_HEAD_DIFF_H

#include "h1.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct h1_head_diff {
    int fast;      /* h1_fast_head's answer: 1 taken, 0 not */
    int slow;      /* h1_llhttp_head's: H1_READY, H1_NEED_MORE or a status */
    char why[200]; /* the first difference found, "" if none */
    /* The fast path's exchange fields when it took the head (for the
     * tests' own expectations). */
    int keep_alive, expect_continue, has_body, cl_present, host_index, version, method;
    size_t nheaders;
    uint32_t head_len;
    int64_t content_length;
} h1_head_diff;

#define H1_DIFF_FIELD(name)                                                                        \
    if (f->name != s->name) {                                                                      \
        snprintf(d->why, sizeof d->why, "%s: fast %lld, llhttp %lld", #name, (long long)f->name,   \
                 (long long)s->name);                                                              \
        return;                                                                                    \
    }

static void h1_diff_compare(const h1_exch *f, const h1_exch *s, h1_head_diff *d)
{
    H1_DIFF_FIELD(method_off);
    H1_DIFF_FIELD(method_len);
    H1_DIFF_FIELD(url_off);
    H1_DIFF_FIELD(url_len);
    H1_DIFF_FIELD(version_off);
    H1_DIFF_FIELD(version_len);
    H1_DIFF_FIELD(head_len);
    H1_DIFF_FIELD(line_done);
    H1_DIFF_FIELD(head_done);
    H1_DIFF_FIELD(has_body);
    H1_DIFF_FIELD(in_name);
    H1_DIFF_FIELD(te_present);
    H1_DIFF_FIELD(cl_present);
    H1_DIFF_FIELD(expect_continue);
    H1_DIFF_FIELD(keep_alive);
    H1_DIFF_FIELD(upgrade_asked);
    H1_DIFF_FIELD(method);
    H1_DIFF_FIELD(host_index);
    H1_DIFF_FIELD(auth_off);
    H1_DIFF_FIELD(auth_len);
    H1_DIFF_FIELD(nheaders);
    H1_DIFF_FIELD(head.content_length);
    H1_DIFF_FIELD(head.version);
    H1_DIFF_FIELD(error_status);
    for (size_t i = 0; i < f->nheaders; i++) {
        H1_DIFF_FIELD(spans[i].name_off);
        H1_DIFF_FIELD(spans[i].name_len);
        H1_DIFF_FIELD(spans[i].value_len);
        /* Where an empty value's view points is no part of its meaning,
         * and llhttp versions (8.x here, 9.x on Homebrew and vcpkg)
         * place it differently. */
        if (f->spans[i].value_len > 0)
            H1_DIFF_FIELD(spans[i].value_off);
        H1_DIFF_FIELD(tokens[i]);
    }
}

/* Runs len bytes at data (read where they are: give them a buffer of
 * exactly len bytes, so that ASan sees a read past the end) as a head
 * under cfg through both parsers; d says what each answered and the first
 * difference. */
static void h1_head_diff_run(const h1_config *cfg, const char *data, size_t len, h1_head_diff *d)
{
    memset(d, 0, sizeof *d);
    h1_worker *wf = calloc(1, sizeof *wf), *ws = calloc(1, sizeof *ws);
    if (wf == NULL || ws == NULL)
        abort();
    wf->cfg = ws->cfg = cfg;
    h1_conn cf, cs;
    memset(&cf, 0, sizeof cf);
    memset(&cs, 0, sizeof cs);
    cf.w = wf;
    cs.w = ws;
    cf.data = cs.data = data;
    cf.len = cs.len = len;
    cf.exch = h1_exch_get(wf);
    cs.exch = h1_exch_get(ws);
    if (cf.exch == NULL || cs.exch == NULL)
        abort();
    h1_parse_init(&cf, cf.exch);
    h1_parse_init(&cs, cs.exch);
    d->fast = h1_fast_head(&cf);
    h1_llhttp_start(&cs, cs.exch);
    d->slow = h1_llhttp_head(&cs);
    if (d->fast) {
        const h1_exch *f = cf.exch;
        d->keep_alive = f->keep_alive;
        d->expect_continue = f->expect_continue;
        d->has_body = f->has_body;
        d->cl_present = f->cl_present;
        d->host_index = f->host_index;
        d->version = f->head.version;
        d->method = f->method;
        d->nheaders = f->nheaders;
        d->head_len = f->head_len;
        d->content_length = f->head.content_length;
        if (cf.pos != 0)
            snprintf(d->why, sizeof d->why, "the fast path moved c->pos");
        else if (d->slow != H1_READY)
            snprintf(d->why, sizeof d->why, "the fast path took a head llhttp answers %d", d->slow);
        else if (cs.pos != f->head_len)
            snprintf(d->why, sizeof d->why, "head ends: fast %u, llhttp %zu", f->head_len, cs.pos);
        else
            h1_diff_compare(f, cs.exch, d);
    }
    h1_exch_put(wf, cf.exch);
    h1_exch_put(ws, cs.exch);
    h1_pool_free(wf);
    h1_pool_free(ws);
    free(wf);
    free(ws);
}

#endif
