/* Compiled, never run, by tests/compile/check-target-minor.cmake: each
 * PROBE_* calls one function of ABI 1.3 (or 1.5, the request trailers,
 * 1.8, keel_connect_error_detail, 1.12, keel_field_make, or 1.13,
 * keel_response_fields_addn), or sets a
 * descriptor field of 1.7 or 1.8 (the fields exist only from the minor
 * that added them).
 * Targeting the minor before the function's every probe must fail to
 * compile (the entry is declared unavailable); targeting its own minor
 * every probe must compile, which proves the failures come from the target
 * and not from a broken file. */
#include <keel/keel.h>

#include <string.h>

int probe(keel_module *module);

int probe(keel_module *module)
{
#if defined(PROBE_STRERROR)
    (void)module;
    return keel_strerror(KEEL_ERR_CLOSED)[0];
#elif defined(PROBE_WORKER_COUNT)
    return (int)keel_module_worker_count(module);
#elif defined(PROBE_CONFIG_ERROR)
    return keel_config_error(module, "key", "bad value '%s'", "x");
#elif defined(PROBE_TIMER_RESTART)
    (void)module;
    return keel_timer_restart((keel_timer *)0, 1, 0);
#elif defined(PROBE_REQUEST_TRAILER)
    (void)module;
    return keel_request_trailer((keel_request *)0, "x").len > 0;
#elif defined(PROBE_HTTP_REQUEST_TRAILERS)
    (void)module;
    return keel_http_request_trailers((keel_request *)0, (const keel_header *)0, 0);
#elif defined(PROBE_CONNECT_ERROR_DETAIL)
    (void)module;
    return keel_connect_error_detail((keel_worker *)0)[0];
#elif defined(PROBE_FIELD_MAKE)
    const keel_prepared_field *f;
    (void)module;
    return keel_field_make("X", 1, "v", 1, &f);
#elif defined(PROBE_FIELDS_ADDN)
    (void)module;
    return keel_response_fields_addn((keel_response *)0, (const keel_field *)0, 0, 0);
#elif defined(PROBE_DESC_CONFIG) || defined(PROBE_DESC_STOPPING) || defined(PROBE_DESC_REOPEN)
    keel_module_desc desc;
    (void)module;
    memset(&desc, 0, sizeof desc);
#if defined(PROBE_DESC_CONFIG)
    desc.config = NULL;
#elif defined(PROBE_DESC_STOPPING)
    desc.stopping = NULL;
#else
    desc.reopen = NULL;
#endif
    return (int)desc.size;
#else
#error "define one PROBE_*"
#endif
}
