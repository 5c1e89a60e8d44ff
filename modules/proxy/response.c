/* response.c — the upstream's response, parsed with llhttp (the parser
 * http1 uses: no hand-written HTTP/1.1 parser), relayed to the client:
 *
 * - the head's fields are copied as they arrive (a head may span reads),
 *   up to max_header (nginx's proxy_buffer_size: a larger head is a 502);
 * - 100 Continue releases the request body (forward.c); other 1xx are
 *   dropped, as nginx does: the response API sends one head per request
 *   (CORE-NEEDS.md 7); 101 after an Upgrade request hands both
 *   connections to the tunnel (tunnel.c);
 * - body bytes parsed from one read go to the client as one piece
 *   (keel_response_write), and the upstream is not read while more than
 *   `buffer` bytes wait for the client: a slow client never makes keel
 *   hold a whole response (nginx's proxy_buffering off with
 *   proxy_busy_buffers_size, in effect);
 * - Content-Length is passed on, so the client sees the same framing;
 *   without it the client's response is chunked (or ends with the
 *   connection for HTTP/1.0), and trailers follow a chunked body;
 * - a response cut short by the upstream cuts the client's too
 *   (forward.c, px_attempt_failed).
 */
#include "px.h"

#include <stdlib.h>
#include <string.h>

static px_ex *ex_of(llhttp_t *p)
{
    return ((px_up *)p->data)->ex;
}

/* ---- the head's fields ---------------------------------------------------------- */

/* The head's bytes copied to ex->hbuf, at most max_header in all (nginx's
 * proxy_buffer_size and fastcgi_buffer_size: a larger head is a 502). */
int px_head_append(px_ex *ex, const char *at, size_t len)
{
    size_t max = ex->route->cfg->max_header;
    if (ex->hlen + ex->hdropped + len > max)
        return -1;
    px_worker *pw = ex->pw;
    if (ex->hbuf == NULL && pw->spare_hbuf != NULL) {
        ex->hbuf = pw->spare_hbuf;
        ex->hcap = pw->spare_hcap;
        pw->spare_hbuf = NULL;
    }
    return keel_append(&ex->hbuf, &ex->hlen, &ex->hcap, at, len, 1024);
}

/* A head's buffers are kept per worker, one of each, for the next
 * response's head rather than freed and allocated again for each: the
 * exchanges of a worker parse their heads one at a time. Large ones go
 * (a head of max_header should not pin that much). */
#define PX_HEAD_KEPT   4096
#define PX_FIELDS_KEPT 64

static void head_buffers_release(px_ex *ex)
{
    px_worker *pw = ex->pw;
    if (pw->spare_hbuf == NULL && !pw->blocks_closed && ex->hcap <= PX_HEAD_KEPT) {
        pw->spare_hbuf = ex->hbuf;
        pw->spare_hcap = ex->hcap;
    } else {
        free(ex->hbuf);
    }
    if (pw->spare_fields == NULL && !pw->blocks_closed && ex->cap_fields <= PX_FIELDS_KEPT) {
        pw->spare_fields = ex->fields;
        pw->spare_fields_cap = ex->cap_fields;
    } else {
        free(ex->fields);
    }
    ex->hbuf = NULL;
    ex->fields = NULL;
    ex->hlen = ex->hcap = ex->nfields = ex->cap_fields = ex->hdropped = 0;
}

static int on_message_begin(llhttp_t *p)
{
    px_ex *ex = ex_of(p);
    ex->nfields = ex->hlen = ex->hdropped = 0;
    ex->in_value = ex->skip_value = 0;
    ex->trailer_from = 0;
    ex->in_trailers = 0;
    return 0;
}

/* Each field's name and value are kept NUL-terminated in ex->hbuf (a NUL
 * after the name, and one after the value before the next name; the last
 * value has keel_append's): headers.c hands them to the response as they
 * lie, with no copy to terminate them. llhttp lets no NUL into a name or
 * a value (a token; RFC 9110 5.5), so the first NUL is the end. The NULs
 * count against max_header as the ": " and CRLF they stand for. */
/* Ends the name or value just appended with a NUL (keel_append's, kept
 * after the bytes, counted in) and keeps one after it for an empty value
 * that follows. The limit is checked by the next append. */
static int head_end_string(px_ex *ex)
{
    if (ex->hbuf != NULL && ex->hlen + 2 <= ex->hcap) {
        ex->hbuf[++ex->hlen] = '\0';
        return 0;
    }
    return px_head_append(ex, "", 1);
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    px_ex *ex = ex_of(p);
    if (ex->nfields == 0 || ex->in_value || (ex->in_trailers && ex->nfields == ex->trailer_from)) {
        /* the value before ends (not one dropped: its bytes went) */
        if (ex->in_value && !ex->skip_value && ex->nfields > 0 && head_end_string(ex) != 0)
            return -1;
        if (ex->fields == NULL && ex->pw->spare_fields != NULL) {
            ex->fields = ex->pw->spare_fields;
            ex->cap_fields = ex->pw->spare_fields_cap;
            ex->pw->spare_fields = NULL;
        }
        if (keel_reserve(&ex->fields, &ex->cap_fields, ex->nfields + 1, sizeof *ex->fields, 32))
            return -1;
        ex->fields[ex->nfields++] = (px_field){(uint32_t)ex->hlen, 0, (uint32_t)ex->hlen, 0, 0};
        ex->in_value = ex->skip_value = 0;
    }
    if (px_head_append(ex, at, len) != 0)
        return -1;
    ex->fields[ex->nfields - 1].name_len += (uint32_t)len;
    ex->fields[ex->nfields - 1].value = (uint32_t)ex->hlen;
    return 0;
}

/* A field of the final head that px_response_headers would drop whatever
 * else the head says (the upstream's Server and Date, unless kept): its
 * value is not copied. */
static int dropped_early(const px_ex *ex, unsigned token)
{
    const px_config *c = ex->route->cfg;
    return (!c->keep_server && token == KEEL_HDR_SERVER) ||
           (!c->keep_date && token == KEEL_HDR_DATE);
}

/* A name llhttp takes that is not a token (RFC 9110 5.1): empty, or with
 * a space inside ("Foo Bar", which llhttp passes unless strict). Never
 * relayed (headers.c vouches for the names it relays), so dropped as
 * dropped_early's are, in the head and in trailers alike (an empty
 * trailer name kept would be relayed as whatever NUL-terminated string
 * lies where it was put in the reused head buffer: a byte of an earlier
 * head, then the value's). A well-known name is a token. */
static int not_a_token(const char *name, size_t len, unsigned token)
{
    if (token != KEEL_HDR_UNKNOWN)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!keel_token_char((unsigned char)name[i]))
            return 1;
    return len == 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    px_ex *ex = ex_of(p);
    if (ex->skip_value) {
        /* Not kept, but counted: a head of endless Date fields is still
         * a head over max_header. */
        if (ex->hlen + ex->hdropped + len > ex->route->cfg->max_header)
            return -1;
        ex->hdropped += len;
        return 0;
    }
    if (ex->nfields == 0)
        return -1;
    if (!ex->in_value) {
        ex->in_value = 1;
        px_field *f = &ex->fields[ex->nfields - 1];
        /* The name is whole: classified here, once (headers.c and the
         * trailers' check read the token). */
        f->token = keel_header_token(ex->hbuf + f->name, f->name_len);
        if ((!ex->in_trailers && dropped_early(ex, f->token)) ||
            not_a_token(ex->hbuf + f->name, f->name_len, f->token)) {
            ex->hdropped += f->name_len;
            ex->hlen = f->name;
            if (ex->hbuf != NULL)
                ex->hbuf[ex->hlen] = '\0'; /* keel_append's NUL */
            ex->nfields--;
            ex->skip_value = 1;
            return on_header_value(p, at, len);
        }
        if (head_end_string(ex) != 0) /* the name ends */
            return -1;
        f->value = (uint32_t)ex->hlen;
    }
    if (px_head_append(ex, at, len) != 0)
        return -1;
    ex->fields[ex->nfields - 1].value_len += (uint32_t)len;
    return 0;
}

/* RFC 9110 6.4.1 (and 8.6, RFC 9112 6.3): a 1xx, 204 or 304 response, or
 * any response to HEAD (9.3.2), ends with its head, whatever its
 * Content-Length or Transfer-Encoding say. llhttp 8 reads a body declared
 * on a 204 or 304 (and an interim response's) unless on_headers_complete
 * returns 1: keel then waited for bytes that never came, until
 * read_timeout, or took the next response's head for a body. */
int px_bodiless(const px_ex *ex, int status)
{
    return status < 200 || status == 204 || status == 304 || ex->is_head;
}

/* RFC 9112 6.1: transfer codings are the hop's. The proxy undoes chunked
 * and no other: a body in any other coding ("gzip, chunked") would reach
 * the client as bytes nothing labels, so such a response is an invalid
 * one (502), as nginx answers "upstream sent unknown Transfer-Encoding". */
static int same_name(keel_str a, const char *b);

static int transfer_coding_ok(const px_ex *ex)
{
    for (size_t i = 0; i < ex->nfields; i++) {
        if (ex->fields[i].token != KEEL_HDR_TRANSFER_ENCODING)
            continue;
        keel_str v = px_field_value(ex, i);
        while (v.len > 0 && (v.ptr[v.len - 1] == ' ' || v.ptr[v.len - 1] == '\t'))
            v.len--;
        while (v.len > 0 && (v.ptr[0] == ' ' || v.ptr[0] == '\t')) {
            v.ptr++;
            v.len--;
        }
        if (!same_name(v, "chunked"))
            return 0;
    }
    return 1;
}

static int on_headers_complete(llhttp_t *p)
{
    px_ex *ex = ex_of(p);
    int status = llhttp_get_status_code(p);
    ex->in_value = ex->skip_value = 0;
    if (status == 101) {
        /* Switching protocols nobody asked for, or to one the client did
         * not offer or keel does not pass (h2c: headers.c). */
        if (!ex->upgrade || !px_upgrade_accepted(ex))
            return -1;
        ex->status = 101;
        return 2; /* no body; llhttp_execute returns HPE_PAUSED_UPGRADE */
    }
    if (status < 200) {
        /* Interim: 100 lets the request body go; the rest are dropped. */
        ex->interim = 1;
        if (status == 100)
            px_continue(ex);
        ex->nfields = ex->hlen = ex->hdropped = 0;
        return 1;
    }
    /* RFC 9110 15: every valid status code is within 100..599: anything
     * else is an invalid response (502), not something to relay. */
    if (status > 599 || !transfer_coding_ok(ex))
        return -1;
    return px_response_head(ex, status);
}

/* The final head (fields in ex->fields) to the client. Whether no body
 * follows. */
int px_response_head(px_ex *ex, int status)
{
    ex->status = status;
    if (ex->req == NULL)
        return px_bodiless(ex, status); /* the client left: read it out, drop it */
    px_peer_ok(ex->peer);
    keel_response_set_status(ex->res, status);
    px_response_headers(ex);
    ex->head_relayed = 1;
    ex->in_trailers = 1;
    /* The head's fields are the response's now (copied): their memory
     * goes, as a response streaming to a slow client may last long;
     * trailers, if any come, start afresh. */
    head_buffers_release(ex);
    ex->trailer_from = 0;
    return px_bodiless(ex, status);
}

int px_body_add(px_ex *ex, const char *at, size_t len)
{
    px_block *b = ex->pend;
    if (b == NULL || ex->plen + len > ex->pcap)
        return -1; /* cannot happen: the block holds the whole read */
    memcpy(b->data + ex->plen, at, len);
    ex->plen += len;
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    return px_body_add(ex_of(p), at, len);
}

static int on_message_complete(llhttp_t *p)
{
    px_ex *ex = ex_of(p);
    if (ex->interim) {
        ex->interim = 0;
        return 0; /* the final response follows */
    }
    if (ex->status == 101)
        return 0; /* llhttp returns HPE_PAUSED_UPGRADE next */
    ex->response_done = 1;
    return HPE_PAUSED;
}

static const llhttp_settings_t settings = {
    .on_message_begin = on_message_begin,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void px_response_init(px_up *up)
{
    llhttp_init(&up->parser, HTTP_RESPONSE, &settings);
    up->parser.data = up;
    up->parser_fed = 0;
    px_framing_reset(&up->framing);
    memset(&up->fcgi, 0, sizeof up->fcgi);
    up->cgi_head_done = 0;
}

/* ---- relaying the body ---------------------------------------------------------------- */

/* Body bytes parsed from several reads in one loop iteration leave in one
 * piece (the core delivers a 16 KiB read buffer at a time, and a write
 * per read costs the client a system call and a chunk each): they are
 * gathered here and flushed at PX_GATHER bytes, at the end of the
 * iteration (a timer of 0 ms) or with the response's end. */
#define PX_GATHER (64 * 1024)

/* Full-size gathering blocks are kept per worker for the next ones, up to
 * PX_BLOCKS_KEPT (4 MiB). A 1 MiB response passes through 16 of them;
 * given back to malloc, each made glibc trim the worker thread's arena
 * (madvise, with a TLB shootdown across cores) and fault its pages in
 * again for the next: two thirds of the proxy's CPU at 16 concurrent
 * 1 MiB responses, once small responses had fragmented the arena. */
#define PX_BLOCKS_KEPT 64

/* An HTTP/1.1 client's small response (one read) goes in a block of
 * PX_SMALL bytes, kept for reuse as well (up to PX_SMALL_KEPT, 128 KiB):
 * a malloc and a free less per response. Not an HTTP/2 client's: its
 * streams may hold a block each, which should be no larger than needed
 * (share.c). */
#define PX_SMALL      2048
#define PX_SMALL_KEPT 64

static px_block *block_get(px_worker *pw, size_t cap)
{
    px_block *b = NULL;
    if (cap == PX_SMALL) {
        KEEL_FREELIST_TAKE(b, pw->free_small, pw->nfree_small, next_free);
    } else if (cap == PX_GATHER) {
        KEEL_FREELIST_TAKE(b, pw->free_blocks, pw->nfree_blocks, next_free);
    }
    if (b != NULL)
        return b;
    if ((b = malloc(sizeof *b + cap)) != NULL)
        b->cap = cap;
    return b;
}

static void block_put(px_worker *pw, px_block *b)
{
    if (b == NULL)
        return;
    if (b->cap == PX_SMALL && pw->nfree_small < PX_SMALL_KEPT && !pw->blocks_closed) {
        KEEL_FREELIST_GIVE(b, pw->free_small, pw->nfree_small, next_free);
        return;
    }
    if (b->cap != PX_GATHER || pw->nfree_blocks >= PX_BLOCKS_KEPT || pw->blocks_closed) {
        free(b);
        return;
    }
    KEEL_FREELIST_GIVE(b, pw->free_blocks, pw->nfree_blocks, next_free);
}

void px_body_blocks_free(px_worker *pw)
{
    KEEL_FREELIST_DRAIN(pw->free_blocks, pw->nfree_blocks, next_free, free);
    KEEL_FREELIST_DRAIN(pw->free_small, pw->nfree_small, next_free, free);
    free(pw->spare_hbuf);
    free(pw->spare_fields);
    pw->spare_hbuf = NULL;
    pw->spare_fields = NULL;
    pw->blocks_closed = 1;
}

static void piece_taken(void *data, void *userdata)
{
    px_block *b = userdata;
    px_ex *ex = b->ex;
    (void)data;
    ex->client_out -= b->len;
    if (ex->share != NULL)
        ex->share->buffered -= b->len;
    keel_metric_add(ex->pw->worker, ex->route->cfg->m_buffered, -(int64_t)b->len);
    px_upstream_release(ex);
    block_put(ex->pw, b);
    px_ex_unref(ex);
}

/* The client left (a response call said so): nothing more goes to it,
 * and the upstream connection, mid-response, cannot be reused. */
void px_response_client_gone(px_ex *ex)
{
    px_up *up = ex->up;
    if (up != NULL) {
        up->ex = NULL;
        ex->up = NULL;
        keel_conn_abort(up->conn);
    }
    px_ex_client_gone(ex); /* the request's reference */
    px_ex_finish(ex);
}

/* Hands the bytes parsed from this read to the client; with whole, as
 * the whole body, which ends the response (keel_response_send: the head
 * and the body leave in one write, framed by a Content-Length rather than
 * a chunk and a last chunk written apart). 0, or -1 if the client is
 * gone. */
static int flush(px_ex *ex, int whole)
{
    px_block *b = ex->pend;
    size_t len = ex->plen;
    ex->pcap_flushed = ex->pcap;
    ex->pend = NULL;
    ex->plen = ex->pcap = 0;
    if (b == NULL)
        return 0;
    if (len == 0 || ex->req == NULL) {
        block_put(ex->pw, b);
        return 0;
    }
    /* What a block holds is what client_out counts: a gathering block
     * only partly filled gives its tail back before it waits for the
     * client (with shut windows it may wait long). */
    if (len + 8192 < ex->pcap_flushed) {
        px_block *tight = realloc(b, sizeof *b + len);
        if (tight != NULL) {
            b = tight;
            b->cap = len;
        }
    }
    b->ex = ex;
    b->len = len;
    px_ex_ref(ex);
    ex->client_out += len;
    if (ex->share != NULL)
        ex->share->buffered += len;
    ex->bytes_out += len;
    keel_metric_add(ex->pw->worker, ex->route->cfg->m_buffered, (int64_t)len);
    if (whole)
        return keel_response_send(ex->res, b->data, len, piece_taken, b) == KEEL_OK ? 0 : -1;
    if (keel_response_write(ex->res, b->data, len, piece_taken, b) != KEEL_OK)
        return -1; /* piece_taken ran already */
    px_upstream_hold(ex);
    return 0;
}

static int same_name(keel_str a, const char *b)
{
    return keel_ascii_iequal_z(a.ptr, a.len, b);
}

static void flush_due(keel_timer *t, void *userdata)
{
    px_ex *ex = userdata;
    (void)t;
    px_ex_ref(ex);
    if (ex->plen > 0 && flush(ex, 0) != 0)
        px_response_client_gone(ex);
    px_ex_unref(ex);
}

/* Room for len more body bytes in the gathering block. 0, or -1 if the
 * client is gone (a full block could not be handed over) or out of
 * memory. */
int px_body_reserve(px_ex *ex, size_t len)
{
    if (ex->pend != NULL && ex->plen + len <= ex->pcap)
        return 0;
    if (ex->plen > 0 && flush(ex, 0) != 0)
        return -1;
    /* a small read is probably a small response: no more room than it
     * needs (and below malloc's mmap threshold either way), or than a
     * kept small block (block_get) */
    size_t gather = px_ex_share(ex) < PX_GATHER ? px_ex_share(ex) : PX_GATHER;
    size_t cap = len < 8192 ? len : len > gather ? len : gather;
    if (cap < PX_SMALL && ex->share == NULL)
        cap = PX_SMALL;
    block_put(ex->pw, ex->pend); /* empty, and too small */
    ex->pend = NULL;
    px_block *b = block_get(ex->pw, cap);
    if (b == NULL)
        return -1;
    ex->pend = b;
    ex->pcap = b->cap;
    return 0;
}

void px_body_flush_soon(px_ex *ex)
{
    if (ex->plen >= PX_GATHER * 3 / 4) {
        if (flush(ex, 0) != 0)
            px_response_client_gone(ex);
        return;
    }
    if (ex->plen == 0)
        return;
    if (ex->flush_timer == NULL)
        ex->flush_timer = keel_timer_start(ex->pw->worker, 0, 0, flush_due, ex);
    else
        keel_timer_restart(ex->flush_timer, 0, 0);
    if (ex->flush_timer == NULL && flush(ex, 0) != 0)
        px_response_client_gone(ex);
}

static int forbidden_trailer(keel_str name, unsigned t)
{
    /* RFC 9110 6.5.1: framing, routing and control fields never come as
     * trailers. */
    switch (t) {
    case KEEL_HDR_CONTENT_LENGTH:
    case KEEL_HDR_TRANSFER_ENCODING:
    case KEEL_HDR_HOST:
    case KEEL_HDR_CONTENT_TYPE:
    case KEEL_HDR_CONTENT_ENCODING:
    case KEEL_HDR_TRAILER:
        return 1;
    default:
        return px_hop_by_hop(name, t, (keel_str){NULL, 0});
    }
}

/* The response is complete: end the client's, give the connection back
 * (to the pool if the upstream keeps it and the request went whole). */
void px_response_complete(px_ex *ex, px_up *up, int upstream_keeps)
{
    int ok = ex->req != NULL;
    /* The whole body is in hand when none of it left before (a small
     * response read at once): sent with the head as one. Not after a HEAD
     * (its head keeps the upstream's length) nor with trailers (they need
     * chunks). */
    int whole = ok && ex->head_relayed && !ex->is_head && ex->bytes_out == 0 && ex->plen > 0 &&
                ex->trailer_from == ex->nfields;
    if (ok && !whole && flush(ex, 0) != 0) {
        px_response_client_gone(ex);
        return;
    }
    if (ok) {
        for (size_t i = ex->trailer_from; i < ex->nfields; i++) {
            keel_str n = px_field_name(ex, i), v = px_field_value(ex, i);
            /* NUL-terminated where they lie (on_header_field) */
            if (!forbidden_trailer(n, ex->fields[i].token))
                keel_response_trailer_add(ex->res, n.ptr, v.ptr);
        }
        px_resume_client(ex);
        px_log_exchange(ex, ex->status);
        int rc = KEEL_OK;
        if (!ex->head_relayed) {
            rc = keel_response_send_status(ex->res, 502);
        } else if (whole) {
            rc = flush(ex, 1); /* ends the response either way */
        } else {
            /* A head-only response keeps its declared Content-Length
             * (HEAD): the head goes out before the end, which would
             * otherwise say 0. */
            if (ex->is_head)
                rc = keel_response_write(ex->res, "", 0, NULL, NULL);
            if (rc == KEEL_OK)
                rc = keel_response_end(ex->res);
        }
        (void)rc; /* KEEL_ERR_CLOSED: the client left at the last moment */
        px_ex_client_gone(ex);
    }
    int reusable =
        upstream_keeps && (ex->body_kind == PX_BODY_NONE || ex->body_done) && ex->up_out == 0;
    px_upstream_unhold(ex); /* it goes back to the pool reading */
    up->ex = NULL;
    ex->up = NULL;
    px_ex_finish(ex);
    px_up_detach(up, reusable);
}

void px_response_eof(px_up *up)
{
    px_ex *ex = up->ex;
    px_ex_ref(ex);
    if (px_body_reserve(ex, 0) != 0) {
        up->ex = NULL;
        ex->up = NULL;
        px_attempt_failed(ex, PX_FAIL_CLIENT);
        px_ex_unref(ex);
        return;
    }
    llhttp_errno_t err = llhttp_finish(&up->parser);
    if (ex->response_done) {
        px_response_complete(ex, up, 0); /* a body that ended with the connection */
    } else {
        up->ex = NULL;
        ex->up = NULL;
        (void)err;
        px_attempt_failed(ex, ex->status ? PX_FAIL_RESET : PX_FAIL_RESET);
    }
    px_ex_unref(ex);
}

void px_body_drop(px_ex *ex)
{
    block_put(ex->pw, ex->pend);
    ex->pend = NULL;
    ex->plen = ex->pcap = 0;
}

/* ---- 101: the tunnel ------------------------------------------------------------------- */

static void switch_protocols(px_ex *ex, px_up *up)
{
    keel_conn *upconn = up->conn;
    px_tunnel *t = px_tunnel_new(ex->route->cfg, ex->pw->worker);
    if (t == NULL || ex->req == NULL) {
        up->ex = NULL;
        ex->up = NULL;
        keel_conn_abort(upconn);
        if (t != NULL)
            px_tunnel_release(t);
        if (ex->req != NULL)
            px_attempt_failed(ex, PX_FAIL_INVALID);
        else
            px_ex_finish(ex);
        return;
    }
    px_response_headers(ex);
    px_log_exchange(ex, 101);
    px_tunnel_expect(t, PX_SIDE_CLIENT);
    int rc = keel_response_upgrade(ex->res, px_tunnel_protocol.name, t);
    up->ex = NULL;
    ex->up = NULL;
    if (rc != KEEL_OK) {
        keel_log(ex->route->cfg->module, KEEL_LOG_INFO, "upgrade to the upstream's %s refused: %s",
                 "protocol", keel_strerror(rc));
        px_tunnel_release(t);
        keel_conn_abort(upconn);
        if (rc == KEEL_ERR_CLOSED) {
            px_ex_client_gone(ex);
        } else {
            keel_response_send_status(ex->res, 502);
            px_ex_client_gone(ex);
        }
        px_ex_finish(ex);
        return;
    }
    px_ex_client_gone(ex); /* the request is gone after an upgrade */
    px_ex_finish(ex);
    keel_metric_add(keel_conn_worker(upconn), ex->route->cfg->m_tunnels, 1);
    keel_conn_set_data(upconn, NULL); /* our on_close, if it still runs, finds nothing */
    free(up);                         /* set_protocol does not call our on_close */
    px_tunnel_expect(t, PX_SIDE_UPSTREAM);
    if (keel_conn_set_protocol(upconn, px_tunnel_protocol.name, t) != KEEL_OK) {
        keel_conn_close(upconn);
        if (t->side[PX_SIDE_CLIENT] != NULL)
            keel_conn_close(t->side[PX_SIDE_CLIENT]);
    }
    px_tunnel_release(t); /* the sides hold it now */
}

/* ---- on_data ------------------------------------------------------------------------------ */

/* A whole plain response in the exchange's first read, taken without
 * llhttp (fasthead.c): what llhttp's callbacks above would do, in their
 * order (the fields, the head relayed, the body, the end). 1 if it was
 * taken, with *keep what llhttp_should_keep_alive would say; 0 with
 * nothing done that llhttp's reading of the same bytes does not redo
 * (on_message_begin starts afresh). */
static int fast_response(px_ex *ex, px_up *up, const char *data, size_t len, int *keep)
{
    px_fast_head h;
    if (up->parser_fed || ex->upgrade || ex->is_head)
        return 0;
    if (ex->fields == NULL && ex->pw->spare_fields != NULL) {
        ex->fields = ex->pw->spare_fields;
        ex->cap_fields = ex->pw->spare_fields_cap;
        ex->pw->spare_fields = NULL;
    }
    if (ex->fields == NULL || !px_fast_head_scan(data, len, ex->fields, ex->cap_fields, &h))
        return 0;
    size_t body = len - h.head_len;
    /* The head whole, its offsets those of data, within max_header as
     * llhttp's path counts it (it counts less than the whole head); the
     * body's room was reserved for the read. */
    if (ex->pend == NULL || ex->plen + body > ex->pcap)
        return 0;
    ex->nfields = ex->hlen = ex->hdropped = 0;
    ex->in_value = ex->skip_value = 0;
    ex->trailer_from = 0;
    ex->in_trailers = 0;
    if (px_head_append(ex, data, h.head_len) != 0) {
        ex->hlen = 0;
        return 0;
    }
    /* Server and Date dropped as on_header_value drops them; each name
     * and value NUL-terminated in place (at its colon and its CR) as
     * on_header_field keeps them. */
    size_t kept = 0;
    for (size_t i = 0; i < h.nfields; i++) {
        px_field f = ex->fields[i];
        if (dropped_early(ex, f.token))
            continue;
        ex->hbuf[f.name + f.name_len] = '\0';
        ex->hbuf[f.value + f.value_len] = '\0';
        ex->fields[kept++] = f;
    }
    ex->nfields = kept;
    px_response_head(ex, h.status); /* not bodiless: fasthead.c took none such */
    if (body > 0)
        px_body_add(ex, data + h.head_len, body);
    ex->response_done = 1;
    *keep = h.keep_alive;
    return 1;
}

/* One read of an HTTP upstream's response, parsed by llhttp. */
static void http_data(px_ex *ex, px_up *up, const char *data, size_t len, size_t *consumed)
{
    int keep;
    if (fast_response(ex, up, data, len, &keep)) {
        px_response_complete(ex, up, keep);
        return;
    }
    up->parser_fed = 1;
    size_t body_at;
    llhttp_errno_t err = px_head_lines_check(&up->framing, data, len, &body_at) != 0
                             ? HPE_LF_EXPECTED
                             : llhttp_execute(&up->parser, data, len);
    if ((err == HPE_OK || (err == HPE_PAUSED && ex->response_done)) &&
        (up->parser.flags & F_CHUNKED) && !px_bodiless(ex, ex->status)) {
        const char *pos = err == HPE_OK ? NULL : llhttp_get_error_pos(&up->parser);
        size_t end = pos != NULL ? (size_t)(pos - data) : len;
        if (end > body_at && px_chunks_check(&up->framing, data + body_at, end - body_at) != 0)
            err = HPE_LF_EXPECTED;
    }
    if (err == HPE_PAUSED && ex->response_done) {
        const char *pos = llhttp_get_error_pos(&up->parser);
        px_response_complete(
            ex, up, (pos == NULL || pos == data + len) && llhttp_should_keep_alive(&up->parser));
    } else if (err == HPE_PAUSED_UPGRADE && ex->status == 101) {
        const char *pos = llhttp_get_error_pos(&up->parser);
        *consumed = pos != NULL ? (size_t)(pos - data) : len;
        px_body_drop(ex);
        switch_protocols(ex, up);
    } else if (err != HPE_OK) {
        keel_log(ex->route->cfg->module, KEEL_LOG_INFO, "upstream %s: invalid response: %s",
                 ex->peer ? ex->peer->srv->authority : "-", llhttp_errno_name(err));
        px_body_drop(ex);
        up->ex = NULL;
        ex->up = NULL;
        keel_conn_abort(up->conn);
        px_attempt_failed(ex, PX_FAIL_INVALID);
    } else {
        px_body_flush_soon(ex);
        px_upstream_hold(ex); /* before libuv reads this socket again */
    }
}

/* One read of the upstream: room for its body bytes first (they are
 * gathered into one piece), then HTTP or FastCGI (fastcgi.c). */
int px_response_data(px_up *up, const char *data, size_t len, size_t *consumed)
{
    px_ex *ex = up->ex;
    int rc = KEEL_OK;
    *consumed = len;
    px_ex_ref(ex);
    if (px_body_reserve(ex, len) != 0) {
        if (ex->req != NULL)
            rc = KEEL_ERR_NOMEM;
        else
            px_response_client_gone(ex);
    } else if (ex->route->group->fastcgi) {
        px_fcgi_records(ex, up, data, len);
    } else {
        http_data(ex, up, data, len, consumed);
    }
    /* A response longer than the first read: larger reads from now on
     * (forward.c, px_up_ready). */
    if (!ex->read_grown && ex->up == up) {
        ex->read_grown = 1;
        keel_conn_set_read_size(up->conn, px_ex_read_size(ex));
    }
    px_ex_unref(ex);
    return rc;
}
