/* An exchange's lifetime: the client's request, the upstream attempt and
 * the continue and flush timers each hold a reference (px.h), and the
 * last one frees it. In a file of its own so that callers cannot inline
 * the free: GCC's -Wuse-after-free then flagged uses after an unref that
 * the references make safe but the compiler cannot see. */
#include "px.h"

#include <stdlib.h>
#include <string.h>

/* Exchanges are kept per worker for the next requests, up to
 * PX_EX_KEPT, rather than allocated and freed for each. */
#define PX_EX_KEPT 64

px_ex *px_ex_new(px_worker *pw)
{
    px_ex *ex = NULL;
    KEEL_FREELIST_TAKE(ex, pw->free_ex, pw->nfree_ex, share_next);
    if (ex != NULL)
        memset(ex, 0, sizeof *ex);
    else if ((ex = calloc(1, sizeof *ex)) == NULL)
        return NULL;
    ex->pw = pw;
    return ex;
}

void px_ex_free_kept(px_worker *pw)
{
    KEEL_FREELIST_DRAIN(pw->free_ex, pw->nfree_ex, share_next, free);
}

void px_ex_ref(px_ex *ex)
{
    ex->refs++;
}

void px_ex_unref(px_ex *ex)
{
    if (--ex->refs > 0)
        return;
    if (ex->continue_timer != NULL)
        keel_timer_stop(ex->continue_timer);
    if (ex->flush_timer != NULL)
        keel_timer_stop(ex->flush_timer);
    px_client_leave(ex);
    px_spool_free(ex->spool);
    px_body_drop(ex);
    free(ex->hbuf);
    free(ex->fields);
#if KEEL_ADDRESS_SANITIZED
    /* ASan reports a use after free only of memory not handed out again
     * at once (http1's pool.c does the same): sanitized builds give every
     * exchange back to malloc, so that an upstream connection, timer or
     * write still pointing at a finished exchange is caught rather than
     * landing in the next request's. */
    free(ex);
#else
    px_worker *pw = ex->pw;
    if (pw->nfree_ex < PX_EX_KEPT && !pw->blocks_closed)
        KEEL_FREELIST_GIVE(ex, pw->free_ex, pw->nfree_ex, share_next);
    else
        free(ex);
#endif
}
