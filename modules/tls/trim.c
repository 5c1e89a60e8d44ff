/* trim.c — an idle connection's record buffers go back to the kernel.
 *
 * mbedTLS gives every connection an input and an output buffer of a full
 * record each (16 KiB plus overhead, MBEDTLS_SSL_{IN,OUT}_CONTENT_LEN) for
 * as long as it lives; Debian's 2.28 has no MBEDTLS_SSL_VARIABLE_BUFFER_LENGTH
 * and neither build lets them go while idle (OpenSSL's
 * SSL_MODE_RELEASE_BUFFERS does). Both stay resident once the allocator
 * reuses memory (calloc zeroes a reused chunk, mbedtls_ssl_free zeroises
 * it again): over 32 KiB per idle connection (docs/tls.md has the
 * numbers).
 *
 * Between records nothing in these buffers is live except their first
 * bytes (the record header and, in 2.28, the record counter kept just
 * before it), so once a connection is between records with nothing
 * pending, the whole pages inside each buffer past its first 64 bytes are
 * handed back with madvise(MADV_DONTNEED): Linux then maps zero pages in
 * again only if a later record is large enough to reach them. Done only
 * after a burst (a read or write of more than a page, or right after the
 * handshake), so small keep-alive exchanges cost no system call.
 *
 * Reads mbedTLS's buffer pointers (public fields in 2.28, MBEDTLS_PRIVATE
 * in 3.x). Linux only; elsewhere a no-op (the figure is then the one
 * above). */
#include "kt.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>

#if KT_MBEDTLS3
#define KT_SSL_FIELD(ssl, f) ((ssl)->MBEDTLS_PRIVATE(f))
#else
#define KT_SSL_FIELD(ssl, f) ((ssl)->f)
#endif

/* The buffers' lengths: their own where mbedTLS resizes them. */
#if defined(MBEDTLS_SSL_VARIABLE_BUFFER_LENGTH)
#define KT_IN_LEN(ssl)  KT_SSL_FIELD(ssl, in_buf_len)
#define KT_OUT_LEN(ssl) KT_SSL_FIELD(ssl, out_buf_len)
#else
#define KT_IN_LEN(ssl)  MBEDTLS_SSL_IN_CONTENT_LEN
#define KT_OUT_LEN(ssl) MBEDTLS_SSL_OUT_CONTENT_LEN
#endif

/* Bytes at the start of a buffer that stay: counter, header, explicit IV. */
#define KEEP 64

static void release(unsigned char *buf, size_t len)
{
    static size_t page;
    if (page == 0) {
        long p = sysconf(_SC_PAGESIZE);
        page = p > 0 ? (size_t)p : 4096;
    }
    if (buf == NULL || len <= KEEP + page)
        return;
    uintptr_t from = ((uintptr_t)buf + KEEP + page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t to = ((uintptr_t)buf + len) & ~(uintptr_t)(page - 1);
    if (to > from)
        madvise((void *)from, to - from, MADV_DONTNEED);
}

void kt_trim(kt_session *s, int in, int out)
{
    mbedtls_ssl_context *ssl = &s->ssl;
    if (s->b.state != KT_OPEN)
        return;
    if (in && mbedtls_ssl_check_pending(ssl) == 0 && mbedtls_ssl_get_bytes_avail(ssl) == 0) {
        release(KT_SSL_FIELD(ssl, in_buf), KT_IN_LEN(ssl));
        s->in_dirty = 0;
    }
    /* bio_send takes everything: nothing waits in the output buffer. */
    if (out && KT_SSL_FIELD(ssl, out_left) == 0) {
        release(KT_SSL_FIELD(ssl, out_buf), KT_OUT_LEN(ssl));
        s->out_dirty = 0;
    }
}

#else

void kt_trim(kt_session *s, int in, int out)
{
    (void)s;
    (void)in;
    (void)out;
}

#endif
