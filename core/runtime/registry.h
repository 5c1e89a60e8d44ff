/* core/runtime/registry.h — protocols, transports and services modules register.
 *
 * Filled on the main thread while modules load, read-only once workers run,
 * so workers read it without locks.
 */
#ifndef KEEL_CORE_REGISTRY_H
#define KEEL_CORE_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include <keel/metrics.h>
#include <keel/types.h>

/* The host's copy of a module's struct, normalised to the host's layout:
 * fields the module's (older, smaller) struct lacks are NULL. */
typedef struct kl_protocol {
    keel_protocol cb;
    keel_module *owner;
} kl_protocol;

typedef struct kl_transport {
    keel_transport cb;
    keel_module *owner;
} kl_transport;

/* A datagram protocol (ABI 1.9): listeners with the `udp` word name one. */
typedef struct kl_dgram_protocol {
    keel_dgram_protocol cb;
    keel_module *owner;
} kl_dgram_protocol;

/* A module's own source of samples (keel_metrics_source_register). */
typedef struct kl_metrics_source {
    keel_metrics_source_fn fn;
    void *userdata;
    keel_module *owner;
} kl_metrics_source;

typedef struct kl_service {
    char *name;
    uint32_t version;
    const void *table;
    keel_module *owner;
} kl_service;

typedef struct kl_registry {
    kl_protocol **protocols;
    size_t nprotocols, protocols_cap;
    kl_transport **transports;
    size_t ntransports, transports_cap;
    kl_service *services;
    size_t nservices, services_cap;
    kl_dgram_protocol **dgram_protocols;
    size_t ndgram_protocols, dgram_protocols_cap;
    kl_metrics_source *sources;
    size_t nsources, sources_cap;
} kl_registry;

void kl_registry_free(kl_registry *r);

int kl_registry_add_protocol(kl_registry *r, keel_module *owner, const keel_protocol *p);
int kl_registry_add_transport(kl_registry *r, keel_module *owner, const keel_transport *t);
int kl_registry_add_service(kl_registry *r, keel_module *owner, const char *name, uint32_t version,
                            const void *table);
int kl_registry_add_dgram_protocol(kl_registry *r, keel_module *owner,
                                   const keel_dgram_protocol *p);
int kl_registry_add_source(kl_registry *r, keel_module *owner, keel_metrics_source_fn fn,
                           void *userdata);

const kl_protocol *kl_registry_protocol(const kl_registry *r, const char *name);
const kl_transport *kl_registry_transport(const kl_registry *r, const char *name);
const kl_dgram_protocol *kl_registry_dgram_protocol(const kl_registry *r, const char *name);
const kl_service *kl_registry_service(const kl_registry *r, const char *name);

#endif
