/* filter.h — the HTTP response filter's configuration and callbacks
 * (filter.c), set up by the module (deflate.c). */
#ifndef KEEL_DEFLATE_FILTER_H
#define KEEL_DEFLATE_FILTER_H

#include "kd.h"

/* The [deflate] keys the filter reads; module data, read-only once load
 * has returned, shared by every worker. */
typedef struct kd_http {
    keel_module *module;
    keel_http_filter filter;
    char **types; /* compressible media types, lower case */
    size_t ntypes;
    uint64_t min_length;
    int compress_files;
    int level, mem_level, window_bits;
    unsigned offered; /* codings offered: bits 1 << KD_* */
    int br_level, zstd_level;
    keel_metric *m_responses, *m_bytes_in, *m_bytes_out; /* NULL until the registry lands */
} kd_http;

void kd_filter_head(keel_request *req, keel_response *res, void *userdata);
int kd_filter_body(keel_request *req, keel_response *res, const keel_buf *bufs, size_t nbufs,
                   int last, void *userdata);
void kd_filter_log(keel_request *req, keel_response *res, const keel_http_log_info *info,
                   void *userdata);

#endif
