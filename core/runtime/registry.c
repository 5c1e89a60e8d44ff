#include "runtime/registry.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* Copies a module's sized struct into the host's layout. A struct from an
 * older module is shorter: the fields it lacks stay zero (NULL hooks). One
 * from a newer module is longer: the host ignores what it does not know. */
static void copy_sized(void *dst, size_t dst_size, const void *src, size_t src_size)
{
    memset(dst, 0, dst_size);
    memcpy(dst, src, src_size < dst_size ? src_size : dst_size);
}

static int valid_name(const char *name)
{
    if (name == NULL || *name == '\0' || strlen(name) > 64)
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' ||
              *p == '.'))
            return 0;
    return 1;
}

int kl_registry_add_protocol(kl_registry *r, keel_module *owner, const keel_protocol *p)
{
    if (p == NULL || p->size < offsetof(keel_protocol, on_open) || !valid_name(p->name))
        return KEEL_ERR_INVAL;
    if (kl_registry_protocol(r, p->name) != NULL)
        return KEEL_ERR_EXISTS;
    if (kl_grow((void **)&r->protocols, &r->protocols_cap, r->nprotocols + 1,
                sizeof *r->protocols) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    kl_protocol *entry = malloc(sizeof *entry);
    if (entry == NULL)
        return KEEL_ERR_NOMEM;
    copy_sized(&entry->cb, sizeof entry->cb, p, p->size);
    entry->cb.size = sizeof entry->cb;
    entry->owner = owner;
    r->protocols[r->nprotocols++] = entry;
    return KEEL_OK;
}

int kl_registry_add_transport(kl_registry *r, keel_module *owner, const keel_transport *t)
{
    if (t == NULL || t->size < offsetof(keel_transport, on_open) || !valid_name(t->name))
        return KEEL_ERR_INVAL;
    if (kl_registry_transport(r, t->name) != NULL)
        return KEEL_ERR_EXISTS;
    if (kl_grow((void **)&r->transports, &r->transports_cap, r->ntransports + 1,
                sizeof *r->transports) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    kl_transport *entry = malloc(sizeof *entry);
    if (entry == NULL)
        return KEEL_ERR_NOMEM;
    copy_sized(&entry->cb, sizeof entry->cb, t, t->size);
    entry->cb.size = sizeof entry->cb;
    entry->owner = owner;
    r->transports[r->ntransports++] = entry;
    return KEEL_OK;
}

int kl_registry_add_dgram_protocol(kl_registry *r, keel_module *owner, const keel_dgram_protocol *p)
{
    if (p == NULL || p->size < offsetof(keel_dgram_protocol, on_batch_end) ||
        p->on_datagram == NULL || !valid_name(p->name))
        return KEEL_ERR_INVAL;
    if (kl_registry_dgram_protocol(r, p->name) != NULL)
        return KEEL_ERR_EXISTS;
    if (kl_grow((void **)&r->dgram_protocols, &r->dgram_protocols_cap, r->ndgram_protocols + 1,
                sizeof *r->dgram_protocols) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    kl_dgram_protocol *entry = malloc(sizeof *entry);
    if (entry == NULL)
        return KEEL_ERR_NOMEM;
    copy_sized(&entry->cb, sizeof entry->cb, p, p->size);
    entry->cb.size = sizeof entry->cb;
    entry->owner = owner;
    r->dgram_protocols[r->ndgram_protocols++] = entry;
    return KEEL_OK;
}

int kl_registry_add_source(kl_registry *r, keel_module *owner, keel_metrics_source_fn fn,
                           void *userdata)
{
    if (fn == NULL)
        return KEEL_ERR_INVAL;
    if (kl_grow((void **)&r->sources, &r->sources_cap, r->nsources + 1, sizeof *r->sources) !=
        KEEL_OK)
        return KEEL_ERR_NOMEM;
    r->sources[r->nsources++] = (kl_metrics_source){fn, userdata, owner};
    return KEEL_OK;
}

int kl_registry_add_service(kl_registry *r, keel_module *owner, const char *name, uint32_t version,
                            const void *table)
{
    if (!valid_name(name) || table == NULL)
        return KEEL_ERR_INVAL;
    if (kl_registry_service(r, name) != NULL)
        return KEEL_ERR_EXISTS;
    if (kl_grow((void **)&r->services, &r->services_cap, r->nservices + 1, sizeof *r->services) !=
        KEEL_OK)
        return KEEL_ERR_NOMEM;
    kl_service *s = &r->services[r->nservices];
    if ((s->name = kl_strdup(name)) == NULL)
        return KEEL_ERR_NOMEM;
    s->version = version;
    s->table = table;
    s->owner = owner;
    r->nservices++;
    return KEEL_OK;
}

const kl_protocol *kl_registry_protocol(const kl_registry *r, const char *name)
{
    for (size_t i = 0; i < r->nprotocols; i++)
        if (strcmp(r->protocols[i]->cb.name, name) == 0)
            return r->protocols[i];
    return NULL;
}

const kl_transport *kl_registry_transport(const kl_registry *r, const char *name)
{
    for (size_t i = 0; i < r->ntransports; i++)
        if (strcmp(r->transports[i]->cb.name, name) == 0)
            return r->transports[i];
    return NULL;
}

const kl_dgram_protocol *kl_registry_dgram_protocol(const kl_registry *r, const char *name)
{
    for (size_t i = 0; i < r->ndgram_protocols; i++)
        if (strcmp(r->dgram_protocols[i]->cb.name, name) == 0)
            return r->dgram_protocols[i];
    return NULL;
}

const kl_service *kl_registry_service(const kl_registry *r, const char *name)
{
    for (size_t i = 0; i < r->nservices; i++)
        if (strcmp(r->services[i].name, name) == 0)
            return &r->services[i];
    return NULL;
}

void kl_registry_free(kl_registry *r)
{
    for (size_t i = 0; i < r->nprotocols; i++)
        free(r->protocols[i]);
    for (size_t i = 0; i < r->ntransports; i++)
        free(r->transports[i]);
    for (size_t i = 0; i < r->nservices; i++)
        free(r->services[i].name);
    for (size_t i = 0; i < r->ndgram_protocols; i++)
        free(r->dgram_protocols[i]);
    free(r->dgram_protocols);
    free(r->sources);
    free(r->protocols);
    free(r->transports);
    free(r->services);
    memset(r, 0, sizeof *r);
}
