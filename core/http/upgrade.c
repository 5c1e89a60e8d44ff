/* Protocol upgrades (keel_response_upgrade, RFC 9110 7.8). */
#include "http/http.h"

int keel_response_upgrade(keel_response *res, const char *protocol, void *arg)
{
    (void)res, (void)protocol, (void)arg;
    return KEEL_ERR_UNSUPPORTED; /* TODO(issue 8): implement */
}
