/* auth_basic/auth_basic.h — the service auth_basic publishes for other
 * modules (ratelimit's key = user, a logger): the user a request
 * authenticated as. Look it up in load with
 *     keel_service_lookup(module, AUTH_BASIC_SERVICE, 1, &table, NULL)
 * (list auth_basic before your module in [keel] modules). */
#ifndef KEEL_AUTH_BASIC_H
#define KEEL_AUTH_BASIC_H

#include <keel/keel.h>

#define AUTH_BASIC_SERVICE "auth_basic"

typedef struct auth_basic_service {
    size_t size; /* sizeof(auth_basic_service) as published */
    /* The user name the request authenticated as (not NUL-terminated:
     * ptr NULL when the request was not authenticated by auth_basic). Valid
     * until the request's log phase ends. Worker thread of the request,
     * after auth_basic's request filter ran (later filters, the handler,
     * the log phase). */
    keel_str (*user)(keel_request *req);
} auth_basic_service;

#endif
