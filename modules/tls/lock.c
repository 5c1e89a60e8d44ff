/* lock.c — a plain mutex for the little shared state that changes after
 * load: the session ticket keys (tickets.c) and, where mbedTLS was built
 * without MBEDTLS_THREADING_C, RSA private-key operations (certs.c).
 * Modules link no libuv, so this is pthreads or Win32 directly. */
#include "kt.h"

#include <stdlib.h>

#ifdef _WIN32
#include <windows.h>
struct kt_lock {
    SRWLOCK srw;
};
#else
#include <pthread.h>
struct kt_lock {
    pthread_mutex_t mutex;
};
#endif

kt_lock *kt_lock_new(void)
{
    kt_lock *lock = calloc(1, sizeof *lock);
    if (lock == NULL)
        return NULL;
#ifdef _WIN32
    InitializeSRWLock(&lock->srw);
#else
    if (pthread_mutex_init(&lock->mutex, NULL) != 0) {
        free(lock);
        return NULL;
    }
#endif
    return lock;
}

void kt_lock_free(kt_lock *lock)
{
    if (lock == NULL)
        return;
#ifndef _WIN32
    pthread_mutex_destroy(&lock->mutex);
#endif
    free(lock);
}

void kt_lock_acquire(kt_lock *lock)
{
#ifdef _WIN32
    AcquireSRWLockExclusive(&lock->srw);
#else
    pthread_mutex_lock(&lock->mutex);
#endif
}

void kt_lock_release(kt_lock *lock)
{
#ifdef _WIN32
    ReleaseSRWLockExclusive(&lock->srw);
#else
    pthread_mutex_unlock(&lock->mutex);
#endif
}
