/* Log fields (ABI 1.8): named values modules attach to a request for its
 * log phase (keel_request_set_log_field). They live in the request's
 * arena as a short list: a request carries a handful at most (the
 * proxy's three), so a walk beats any table, and a request that has none
 * pays one pointer zeroed with the rest of its state. A name prepared at
 * load (keel_log_name_prepare, ABI 1.13) is checked and copied once: a
 * field set by it points at it. */
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

enum { KL_LOG_NAME_MAX = 32, KL_LOG_VALUE_MAX = 4096 };

struct kl_log_field {
    struct kl_log_field *next;
    keel_header field;
};

/* a-z, 0-9 and '_': a name that is a word in any log format (a JSON key,
 * a template's $field_NAME) without quoting. */
static const unsigned char name_bytes[256] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
    ['8'] = 1, ['9'] = 1, ['_'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1,
    ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1,
    ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1,
    ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
};

static int name_ok(const char *name, size_t *len)
{
    size_t n = 0;
    while (n < KL_LOG_NAME_MAX && name_bytes[(unsigned char)name[n]])
        n++;
    *len = n;
    return n > 0 && name[n] == '\0';
}

static struct kl_log_field *find(keel_request *req, const char *name, size_t len)
{
    for (struct kl_log_field *f = req->log_fields; f != NULL; f = f->next)
        if (f->field.name.len == len && memcmp(f->field.name.ptr, name, len) == 0)
            return f;
    return NULL;
}

/* Sets the field name[0..nlen) (checked) to value[0..len). `kept`: the
 * name outlives the request (a prepared one), so a new field points at it
 * instead of copying it. One walk finds the field or the list's tail. */
static int set_field(keel_request *req, const char *name, size_t nlen, int kept, const char *value,
                     size_t len)
{
    struct kl_log_field **tail = &req->log_fields;
    for (struct kl_log_field *f; (f = *tail) != NULL; tail = &f->next) {
        if (f->field.name.len != nlen ||
            (f->field.name.ptr != name && memcmp(f->field.name.ptr, name, nlen) != 0))
            continue;
        char *copy = kl_arena_dup(&req->arena, len > 0 ? value : "", len);
        if (copy == NULL)
            return KEEL_ERR_NOMEM;
        f->field.value = (keel_str){copy, len};
        return KEEL_OK;
    }
    /* A new field, its name (unless kept) and its value in one piece of
     * the arena. */
    size_t name_room = kept ? 0 : nlen + 1;
    struct kl_log_field *f = kl_arena_alloc(&req->arena, sizeof *f + name_room + len + 1);
    if (f == NULL)
        return KEEL_ERR_NOMEM;
    char *copy = (char *)(f + 1) + name_room;
    if (!kept) {
        memcpy(f + 1, name, nlen + 1);
        name = (const char *)(f + 1);
    }
    if (len > 0)
        memcpy(copy, value, len);
    copy[len] = '\0';
    f->next = NULL;
    f->field.name = (keel_str){name, nlen};
    f->field.value = (keel_str){copy, len};
    *tail = f;
    return KEEL_OK;
}

int keel_request_set_log_field(keel_request *req, const char *name, const char *value, size_t len)
{
    size_t nlen;
    if (req == NULL || name == NULL || !name_ok(name, &nlen) || (value == NULL && len > 0) ||
        len > KL_LOG_VALUE_MAX)
        return KEEL_ERR_INVAL;
    if (req->logged)
        return KEEL_ERR_STATE;
    return set_field(req, name, nlen, 0, value, len);
}

int keel_request_set_log_field_named(keel_request *req, const keel_log_name *name,
                                     const char *value, size_t len)
{
    if (req == NULL || name == NULL || (value == NULL && len > 0) || len > KL_LOG_VALUE_MAX)
        return KEEL_ERR_INVAL;
    if (req->logged)
        return KEEL_ERR_STATE;
    return set_field(req, name->name.ptr, name->name.len, 1, value, len);
}

int kl_log_name_new(const char *name, keel_log_name **out)
{
    size_t nlen;
    *out = NULL;
    if (name == NULL || !name_ok(name, &nlen))
        return KEEL_ERR_INVAL;
    keel_log_name *n = malloc(sizeof *n + nlen + 1);
    if (n == NULL)
        return KEEL_ERR_NOMEM;
    char *text = (char *)(n + 1);
    memcpy(text, name, nlen + 1);
    n->next = NULL;
    n->name = (keel_str){text, nlen};
    *out = n;
    return KEEL_OK;
}

void kl_log_names_free(keel_log_name *list)
{
    while (list != NULL) {
        keel_log_name *next = list->next;
        free(list);
        list = next;
    }
}

keel_str keel_request_log_field(keel_request *req, const char *name)
{
    size_t len;
    struct kl_log_field *f =
        req != NULL && name != NULL && name_ok(name, &len) ? find(req, name, len) : NULL;
    return f != NULL ? f->field.value : (keel_str){NULL, 0};
}

int keel_request_log_field_at(keel_request *req, size_t index, keel_header *out)
{
    if (req == NULL || out == NULL)
        return KEEL_ERR_INVAL;
    struct kl_log_field *f = req->log_fields;
    for (; f != NULL && index > 0; index--)
        f = f->next;
    if (f == NULL)
        return KEEL_ERR_NOTFOUND;
    *out = f->field;
    return KEEL_OK;
}
