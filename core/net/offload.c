/* Work off the loop that is not tied to a request (keel_worker_offload). */
#include "net/worker.h"

int keel_worker_offload(keel_worker *w, keel_offload_fn work, keel_work_done_fn done,
                        void *userdata)
{
    (void)w, (void)work, (void)done, (void)userdata;
    return KEEL_ERR_UNSUPPORTED; /* TODO(issue 8): implement */
}
