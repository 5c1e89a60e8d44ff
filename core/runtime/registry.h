/* core/runtime/registry.h — protocols, transports and services modules register.
 *
 * Filled on the main thread while modules load, read-only once workers run,
 * so workers read it without locks.
 */
#ifndef KEEL_CORE_REGISTRY_H
#define KEEL_CORE_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

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
} kl_registry;

void kl_registry_free(kl_registry *r);

int kl_registry_add_protocol(kl_registry *r, keel_module *owner, const keel_protocol *p);
int kl_registry_add_transport(kl_registry *r, keel_module *owner, const keel_transport *t);
int kl_registry_add_service(kl_registry *r, keel_module *owner, const char *name, uint32_t version,
                            const void *table);

const kl_protocol *kl_registry_protocol(const kl_registry *r, const char *name);
const kl_transport *kl_registry_transport(const kl_registry *r, const char *name);
const kl_service *kl_registry_service(const kl_registry *r, const char *name);

#endif
