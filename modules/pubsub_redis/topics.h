/* topics.h — the active topics of an instance: a set of names, O(1) to
 * add, remove and look up (topics.c). Worker 0's alone: no locking. */
#ifndef PR_TOPICS_H
#define PR_TOPICS_H

#include <stddef.h>
#include <stdint.h>

/* One topic: a node of a chained hash set. */
typedef struct pr_topic {
    struct pr_topic *next;
    uint64_t hash;
    size_t len;
    char name[]; /* NUL-terminated */
} pr_topic;

/* Zeroed is empty. buckets[0, nbuckets) may be walked to visit every
 * topic (the resubscription after a reconnect). */
typedef struct pr_topics {
    pr_topic **buckets;
    size_t nbuckets; /* a power of two, or 0 */
    size_t count;
} pr_topics;

/* Adds topic[0, len): 1 if it was not there, 0 if it was,
 * KEEL_ERR_NOMEM (nothing added). */
int pr_topics_add(pr_topics *set, const char *topic, size_t len);

/* Removes topic[0, len): 1 if it was there, else 0. */
int pr_topics_remove(pr_topics *set, const char *topic, size_t len);

/* Frees every topic and the table; the set is empty again. */
void pr_topics_free(pr_topics *set);

#endif
