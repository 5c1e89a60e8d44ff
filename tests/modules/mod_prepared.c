/* prepared — keel_field_prepare and keel_response_field_add (ABI 1.8)
 * for test_prepared_fields.c: every `field = NAME: VALUE` of a scope is
 * prepared at load, with no check of the module's own, so that what the
 * core refuses is reported (keel_config_value_error: file:line). GET
 * answers "ok" with Content-Type: text/plain and X-Handler: handler set
 * first, then the scope's fields added, each replacing the fields of its
 * name when `replace` is on. */
#include <keel/keel.h>

#include <stdlib.h>
#include <string.h>

typedef struct prepared_conf {
    keel_config_list fields;
    int replace;
} prepared_conf;

static const keel_config_key prepared_keys[] = {
    KEEL_KEY(prepared_conf, fields, "field", KEEL_CONFIG_STRING, .flags = KEEL_CONFIG_LIST,
             .scopes = KEEL_SCOPE_ANY, .doc = "NAME: VALUE prepared at load"),
    KEEL_KEY(prepared_conf, replace, "replace", KEEL_CONFIG_BOOL, .scopes = KEEL_SCOPE_ANY,
             .def = "off", .doc = "on: each field replaces the fields of its name"),
};
KEEL_CONFIG_SCHEMA(prepared_schema, prepared_conf, prepared_keys);

typedef struct prepared_scope {
    const prepared_conf *conf;
    const keel_prepared_field **fields;
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
    const keel_prepared_field **fields = calloc(c->fields.count + 1, sizeof *fields);
    if (fields == NULL)
        return KEEL_ERR_NOMEM;
    scopes[nscopes++] = (prepared_scope){c, fields};
    for (size_t i = 0; i < c->fields.count; i++) {
        const char *item = c->fields.items[i], *colon = strchr(item, ':');
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

static int prepared_load(keel_module *m)
{
    /* Outside load the core refuses: checked once the server serves, in
     * start. Here it must work. */
    int rc = prepare(m, keel_module_config(m), NULL);
    if (rc == KEEL_OK)
        rc = keel_module_config_scopes(m, prepare, NULL);
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
