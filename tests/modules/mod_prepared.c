/* prepared — keel_field_prepare and keel_response_field_add (ABI 1.8)
 * for test_prepared_fields.c: every `field = NAME: VALUE` of a scope is
 * prepared at load, with no check of the module's own, so that what the
 * core refuses is reported (keel_config_value_error: file:line). GET
 * answers "ok" with Content-Type: text/plain and X-Handler: handler set
 * first, then the scope's fields added, each replacing the fields of its
 * name when `replace` is on.
 *
 * ABI 1.11: a response head filter with a scope hook
 * (keel_http_filter.scope) adds the scope's `head` fields with one
 * keel_response_fields_add call (replacing as `replace` says), then
 * X-Head-Filter: ran and X-Scope-Asked: N (how many times the hook was
 * asked about the scope's struct); the hook leaves the filter out of the
 * scopes without `head` fields, and fails the load where `scope_error` is
 * on. The filter checks the call's refusals first (a NULL entry, a NULL
 * array) and says X-Batch-Error: WHAT if one was not refused or added
 * something.
 *
 * Built for ABI 1.11 (KEEL_TARGET_ABI_MINOR): the module every 1.11 host
 * loaded, loading on this one (test_prepared_fields.c checks the load
 * line's ABI). */
#define KEEL_TARGET_ABI_MINOR 11
#include <keel/keel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct prepared_conf {
    keel_config_list fields;
    int replace;
    keel_config_list head;
    int scope_error;
} prepared_conf;

static const keel_config_key prepared_keys[] = {
    KEEL_KEY(prepared_conf, fields, "field", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .scopes = KEEL_SCOPE_ANY, .doc = "NAME: VALUE prepared at load"),
    KEEL_KEY(prepared_conf, replace, "replace", KEEL_CONFIG_BOOL, .scopes = KEEL_SCOPE_ANY,
             .def = "off", .doc = "on: each field replaces the fields of its name"),
    KEEL_KEY(prepared_conf, head, "head", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .scopes = KEEL_SCOPE_ANY, .doc = "NAME: VALUE the head filter adds in one call"),
    KEEL_KEY(prepared_conf, scope_error, "scope_error", KEEL_CONFIG_BOOL, .scopes = KEEL_SCOPE_ANY,
             .def = "off", .doc = "on: the filter's scope hook fails"),
};
KEEL_CONFIG_SCHEMA(prepared_schema, prepared_conf, prepared_keys);

typedef struct prepared_scope {
    const prepared_conf *conf;
    const keel_prepared_field **fields;
    const keel_prepared_field **head;
    int asked; /* the filter's scope hook calls about conf */
} prepared_scope;

static prepared_scope *scopes;
static size_t nscopes;

static int prepare(keel_module *m, const void *confp, void *ud)
{
    (void)ud;
    const prepared_conf *c = confp;
    for (size_t i = 0; i < nscopes; i++)
        if (scopes[i].conf == c)
            return KEEL_OK;
    prepared_scope *grown = realloc(scopes, (nscopes + 1) * sizeof *grown);
    if (grown == NULL)
        return KEEL_ERR_NOMEM;
    scopes = grown;
    const keel_prepared_field **fields =
        calloc(c->fields.count + c->head.count + 1, sizeof *fields);
    if (fields == NULL)
        return KEEL_ERR_NOMEM;
    scopes[nscopes++] = (prepared_scope){c, fields, fields + c->fields.count, 0};
    for (size_t i = 0; i < c->fields.count + c->head.count; i++) {
        const char *item =
            i < c->fields.count ? c->fields.items[i] : c->head.items[i - c->fields.count];
        const char *colon = strchr(item, ':');
        const char *value = colon ? colon + 1 : "";
        while (*value == ' ')
            value++;
        size_t name_len = colon ? (size_t)(colon - item) : strlen(item);
        int rc = keel_field_prepare(m, item, name_len, value, strlen(value), &fields[i]);
        if (rc == KEEL_ERR_INVAL)
            return keel_config_value_error(m, item, "keel_field_prepare refused the field");
        if (rc != KEEL_OK)
            return rc;
    }
    return KEEL_OK;
}

static int answer(keel_request *req, keel_response *res, void *ud)
{
    const prepared_conf *c = keel_request_config(req, (keel_module *)ud);
    keel_response_header_set(res, "Content-Type", "text/plain");
    keel_response_header_set(res, "X-Handler", "handler");
    for (size_t i = 0; i < nscopes; i++)
        if (scopes[i].conf == c)
            for (size_t k = 0; k < c->fields.count; k++)
                if (keel_response_field_add(res, scopes[i].fields[k], c->replace) != KEEL_OK)
                    return keel_response_send_status(res, 500);
    /* A NULL field is refused, and nothing is added. */
    if (keel_response_field_add(res, NULL, 0) != KEEL_ERR_INVAL)
        return keel_response_send_status(res, 500);
    return keel_response_send_copy(res, "ok\n", 3);
}

static int head_scope(const void *conf, void *ud, void **scope_ud)
{
    (void)ud;
    const prepared_conf *c = conf;
    if (c->scope_error)
        return KEEL_ERR_CONFIG;
    if (c->head.count == 0)
        return 0;
    for (size_t i = 0; i < nscopes; i++)
        if (scopes[i].conf == c) {
            scopes[i].asked++;
            *scope_ud = &scopes[i];
            return 1;
        }
    return KEEL_ERR_STATE;
}

static void on_head(keel_request *req, keel_response *res, void *ud)
{
    (void)req;
    const prepared_scope *s = ud;
    size_t before = keel_response_header_count(res);
    const keel_prepared_field *with_null[2] = {s->head[0], NULL};
    const char *error = NULL;
    if (keel_response_fields_add(res, with_null, 2, s->conf->replace) != KEEL_ERR_INVAL ||
        keel_response_header_count(res) != before)
        error = "a NULL entry";
    else if (keel_response_fields_add(res, NULL, 1, 0) != KEEL_ERR_INVAL)
        error = "a NULL array";
    else if (keel_response_fields_add(res, NULL, 0, 0) != KEEL_OK)
        error = "no field";
    else if (keel_response_fields_add(res, s->head, s->conf->head.count, s->conf->replace) !=
             KEEL_OK)
        error = "the scope's fields";
    if (error != NULL)
        keel_response_header_set(res, "X-Batch-Error", error);
    char asked[24];
    snprintf(asked, sizeof asked, "%d", s->asked);
    keel_response_header_set(res, "X-Head-Filter", "ran");
    keel_response_header_set(res, "X-Scope-Asked", asked);
}

static const keel_http_filter head_filter = {
    .size = sizeof(keel_http_filter),
    .name = "prepared",
    .on_response_head = on_head,
    .scope = head_scope,
};

static int prepared_load(keel_module *m)
{
    /* Outside load the core refuses: checked once the server serves, in
     * start. Here it must work. */
    int rc = prepare(m, keel_module_config(m), NULL);
    if (rc == KEEL_OK)
        rc = keel_module_config_scopes(m, prepare, NULL);
    if (rc == KEEL_OK)
        rc = keel_http_filter_add(m, &head_filter);
    if (rc == KEEL_OK)
        rc = keel_route_add(m, "GET", "/", answer, m);
    return rc < 0 ? rc : keel_route_add(m, "GET", "/*", answer, m);
}

static int prepared_start(keel_module *m, keel_worker *worker, void *state)
{
    (void)worker;
    (void)state;
    const keel_prepared_field *f = NULL;
    if (keel_field_prepare(m, "X-Late", 6, "v", 1, &f) != KEEL_ERR_STATE || f != NULL) {
        keel_log(m, KEEL_LOG_ERROR, "keel_field_prepare outside load was not refused");
        return KEEL_ERR_STATE;
    }
    return KEEL_OK;
}

static void prepared_unload(keel_module *m)
{
    (void)m;
    for (size_t i = 0; i < nscopes; i++)
        free((void *)scopes[i].fields);
    free(scopes);
    scopes = NULL;
    nscopes = 0;
}

KEEL_MODULE(prepared, .version = "1.0.0", .load = prepared_load, .start = prepared_start,
            .unload = prepared_unload, .config = &prepared_schema);
