/* An exchange's lifetime: the client's request, the upstream attempt and
 * the continue and flush timers each hold a reference (px.h), and the
 * last one frees it. In a file of its own so that callers cannot inline
 * the free: GCC's -Wuse-after-free then flagged uses after an unref that
 * the references make safe but the compiler cannot see. */
#include "px.h"

#include <stdlib.h>

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
    free(ex);
}
