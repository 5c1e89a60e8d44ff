/* topics.c — the set of topics with local subscribers.
 *
 * Every local subscriber's first subscription to a topic, and its last
 * unsubscription, looks the topic up here, on worker 0. Applications make
 * a topic per connection (the chat example's inboxes), so this has to stay
 * O(1): with a linear scan, N topics cost O(N^2) to add and remove, and
 * tens of thousands of them hold worker 0, and every connection it
 * serves, for seconds (docs/performance.md).
 */
#include "topics.h"

#include <keel/types.h>

#include <stdlib.h>
#include <string.h>

/* FNV-1a, 64-bit. */
static uint64_t topic_hash(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static pr_topic **topic_slot(const pr_topics *set, const char *topic, size_t len, uint64_t h)
{
    pr_topic **at = &set->buckets[h & (set->nbuckets - 1)];
    while (*at != NULL &&
           ((*at)->hash != h || (*at)->len != len || memcmp((*at)->name, topic, len) != 0))
        at = &(*at)->next;
    return at;
}

/* Doubles the table (a power of two, so the mask picks the bucket). */
static int topics_grow(pr_topics *set)
{
    size_t n = set->nbuckets ? set->nbuckets * 2 : 64;
    pr_topic **b = calloc(n, sizeof *b);
    if (b == NULL)
        return KEEL_ERR_NOMEM;
    for (size_t i = 0; i < set->nbuckets; i++)
        for (pr_topic *t = set->buckets[i], *next; t != NULL; t = next) {
            next = t->next;
            t->next = b[t->hash & (n - 1)];
            b[t->hash & (n - 1)] = t;
        }
    free(set->buckets);
    set->buckets = b;
    set->nbuckets = n;
    return KEEL_OK;
}

int pr_topics_add(pr_topics *set, const char *topic, size_t len)
{
    if (set->count >= set->nbuckets && topics_grow(set) != KEEL_OK)
        return KEEL_ERR_NOMEM;
    uint64_t h = topic_hash(topic, len);
    pr_topic **at = topic_slot(set, topic, len, h);
    if (*at != NULL)
        return 0;
    pr_topic *t = malloc(sizeof *t + len + 1);
    if (t == NULL)
        return KEEL_ERR_NOMEM;
    t->next = NULL;
    t->hash = h;
    t->len = len;
    memcpy(t->name, topic, len);
    t->name[len] = '\0';
    *at = t;
    set->count++;
    return 1;
}

int pr_topics_remove(pr_topics *set, const char *topic, size_t len)
{
    if (set->nbuckets == 0)
        return 0;
    pr_topic **at = topic_slot(set, topic, len, topic_hash(topic, len));
    pr_topic *t = *at;
    if (t == NULL)
        return 0;
    *at = t->next;
    free(t);
    set->count--;
    return 1;
}

void pr_topics_free(pr_topics *set)
{
    for (size_t i = 0; i < set->nbuckets; i++)
        for (pr_topic *t = set->buckets[i], *next; t != NULL; t = next) {
            next = t->next;
            free(t);
        }
    free(set->buckets);
    *set = (pr_topics){0};
}
