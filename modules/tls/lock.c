/* lock.c — a plain mutex for the little shared state that changes after
 * load: the session ticket keys (tickets.c) and, where mbedTLS was built
 * without MBEDTLS_THREADING_C, RSA private-key operations (certs.c).
 * Modules link no libuv, so this is pthreads or Win32 directly. */
#include "kt.h"

#include <stdlib.h>

/* The platform's calls, named once. */
#ifdef _WIN32
#include <windows.h>
struct kt_lock {
    SRWLOCK srw;
};
#define LOCK_INIT(l)    (InitializeSRWLock(&(l)->srw), 0)
#define LOCK_DESTROY(l) ((void)(l))
#define LOCK_ACQUIRE(l) AcquireSRWLockExclusive(&(l)->srw)
#define LOCK_RELEASE(l) ReleaseSRWLockExclusive(&(l)->srw)
#else
#include <pthread.h>
struct kt_lock {
    pthread_mutex_t mutex;
};
#define LOCK_INIT(l)    pthread_mutex_init(&(l)->mutex, NULL)
#define LOCK_DESTROY(l) pthread_mutex_destroy(&(l)->mutex)
#define LOCK_ACQUIRE(l) pthread_mutex_lock(&(l)->mutex)
#define LOCK_RELEASE(l) pthread_mutex_unlock(&(l)->mutex)
#endif

kt_lock *kt_lock_new(void)
{
    kt_lock *lock = calloc(1, sizeof *lock);
    if (lock == NULL || LOCK_INIT(lock) == 0)
        return lock;
    free(lock);
    return NULL;
}

void kt_lock_free(kt_lock *lock)
{
    if (lock == NULL)
        return;
    LOCK_DESTROY(lock);
    free(lock);
}

void kt_lock_acquire(kt_lock *lock)
{
    LOCK_ACQUIRE(lock);
}

void kt_lock_release(kt_lock *lock)
{
    LOCK_RELEASE(lock);
}
