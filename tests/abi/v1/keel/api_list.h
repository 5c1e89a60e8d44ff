/* keel/api_list.h — every function the host offers to modules, in table order.
 *
 * This file is the single list from which the host's function table, the
 * module-side wrappers and libkeel's exported prototypes are generated (see
 * keel/api.h). It is included several times with different definitions of
 *     KEEL_FN(return_type, name, (parameters), (arguments))
 *     KEEL_VFN(name, (parameters), (arguments))       for void functions
 * and so has no include guard. Each entry becomes keel_<name>().
 *
 * ABI RULE: entries are only ever appended at the end, with KEEL_ABI_MINOR
 * bumped. Never reorder, remove or change an entry's signature.
 *
 * Threads: "main" is the thread that runs keel_server_run() (module load and
 * unload happen there); "worker" is a connection's or timer's own worker
 * thread. Calling a function from a thread it does not allow is undefined.
 */
/* clang-format off */

/* ---- Modules (ABI 1.0) ------------------------------------------------- */

/* The module's name as written in the config. Never NULL; valid until
 * unload. Any thread. */
KEEL_FN(const char *, module_name, (keel_module *module), (module))

/* Attaches one pointer of module-wide data (typically the parsed config).
 * Call from load on the main thread; read it from any thread afterwards.
 * The module owns the data and frees it in unload. */
KEEL_VFN(module_set_data, (keel_module *module, void *data), (module, data))

/* The pointer set with keel_module_set_data, or NULL. Any thread. */
KEEL_FN(void *, module_data, (keel_module *module), (module))

/* ---- Configuration (ABI 1.0) ------------------------------------------- *
 * A module reads the keys of its own [name] section during load (main
 * thread only). A key no module reads is reported as unknown once every
 * module has loaded, so read every key you accept. On a bad value the
 * getter logs "FILE:LINE: [section] key: reason", leaves *out at the
 * default and returns KEEL_ERR_CONFIG; load should then return it. A missing
 * key yields the default and KEEL_OK. */

/* A string value. *out stays valid until the module is unloaded. If the key
 * is repeated, the last value wins. */
KEEL_FN(int, config_string,
        (keel_module *module, const char *key, const char *def, const char **out),
        (module, key, def, out))

/* A decimal integer within [min, max]. */
KEEL_FN(int, config_int,
        (keel_module *module, const char *key, int64_t def, int64_t min, int64_t max,
         int64_t *out),
        (module, key, def, min, max, out))

/* A boolean: on/off, yes/no, true/false, 1/0 (any case). *out is 0 or 1. */
KEEL_FN(int, config_bool, (keel_module *module, const char *key, int def, int *out),
        (module, key, def, out))

/* A size in bytes with an optional k, m or g suffix (powers of 1024). */
KEEL_FN(int, config_size, (keel_module *module, const char *key, uint64_t def, uint64_t *out),
        (module, key, def, out))

/* A duration in milliseconds written as 250ms, 10s, 5m or 1h; a bare number
 * means seconds (as in nginx). */
KEEL_FN(int, config_duration_ms,
        (keel_module *module, const char *key, uint64_t def, uint64_t *out),
        (module, key, def, out))

/* How many times a key appears in the section (0 if absent). Marks the key
 * as read. */
KEEL_FN(size_t, config_count, (keel_module *module, const char *key), (module, key))

/* The index-th value (0-based, file order) of a repeated key. Returns
 * KEEL_ERR_NOTFOUND past the last one. *out stays valid until unload. */
KEEL_FN(int, config_string_at,
        (keel_module *module, const char *key, size_t index, const char **out),
        (module, key, index, out))

/* ---- Registries (ABI 1.0) ---------------------------------------------- *
 * Register and publish from load (main thread) only; names are unique per
 * server (KEEL_ERR_EXISTS otherwise). The structs and tables passed in are
 * borrowed and must stay valid until the module is unloaded (static
 * storage is the usual choice). */

/* Registers a connection protocol under protocol->name. */
KEEL_FN(int, protocol_register, (keel_module *module, const keel_protocol *protocol),
        (module, protocol))

/* Registers a transport under transport->name. */
KEEL_FN(int, transport_register, (keel_module *module, const keel_transport *transport),
        (module, transport))

/* Publishes a named, versioned table of functions for other modules. By
 * convention the table starts with a size_t holding its own size. */
KEEL_FN(int, service_publish,
        (keel_module *module, const char *name, uint32_t version, const void *table),
        (module, name, version, table))

/* Looks up a service published by a module loaded earlier (list it in
 * `requires` to be sure). Fails with KEEL_ERR_NOTFOUND if absent and
 * KEEL_ERR_ABI if its version is below min_version. *version_out (may be
 * NULL) receives the published version. Main thread, from load. */
KEEL_FN(int, service_lookup,
        (keel_module *module, const char *name, uint32_t min_version, const void **table,
         uint32_t *version_out),
        (module, name, min_version, table, version_out))

/* ---- Logging (ABI 1.0) ------------------------------------------------- */

/* Writes one log line "TIME [level] module: message" if level is enabled.
 * module may be NULL. Any thread; a line is never interleaved with another.
 * Use the keel_log() convenience wrapper for printf-style arguments. */
KEEL_VFN(logv, (keel_module *module, int level, const char *fmt, va_list ap),
         (module, level, fmt, ap))

/* Non-zero if messages of this level are written. Any thread. */
KEEL_FN(int, log_enabled, (int level), (level))

/* ---- Workers (ABI 1.0) ------------------------------------------------- */

/* This module's per-worker block (worker_state_size zeroed bytes), or NULL if
 * the module declared none. Worker thread of `worker`. */
KEEL_FN(void *, worker_state, (keel_worker *worker, keel_module *module), (worker, module))

/* The worker's index, 0 .. count-1. Any thread. */
KEEL_FN(unsigned, worker_id, (keel_worker *worker), (worker))

/* The number of workers of the server the worker belongs to. Any thread. */
KEEL_FN(unsigned, worker_count, (keel_worker *worker), (worker))

/* The loop's cached time in milliseconds (monotonic, arbitrary origin),
 * updated once per loop iteration. Worker thread. */
KEEL_FN(uint64_t, worker_now_ms, (keel_worker *worker), (worker))

/* Runs fn(worker, userdata) on the worker's thread soon. Any thread; this is
 * how work done elsewhere resumes on the owning loop. Fails with
 * KEEL_ERR_SHUTDOWN once the worker has stopped (fn is then never called)
 * and KEEL_ERR_NOMEM. */
KEEL_FN(int, worker_post, (keel_worker *worker, keel_post_fn fn, void *userdata),
        (worker, fn, userdata))

/* Non-zero once a graceful shutdown has begun. Any thread. */
KEEL_FN(int, worker_stopping, (keel_worker *worker), (worker))

/* ---- Timers (ABI 1.0) -------------------------------------------------- */

/* Calls cb after timeout_ms, then every repeat_ms if that is non-zero. The
 * timer belongs to the worker and runs on its thread; it is freed by
 * keel_timer_stop or when the worker stops. Returns NULL if out of memory.
 * Worker thread. */
KEEL_FN(keel_timer *, timer_start,
        (keel_worker *worker, uint64_t timeout_ms, uint64_t repeat_ms, keel_timer_cb cb,
         void *userdata),
        (worker, timeout_ms, repeat_ms, cb, userdata))

/* Stops and frees the timer; its callback will not run again. Safe inside
 * the callback. Worker thread. */
KEEL_VFN(timer_stop, (keel_timer *timer), (timer))

/* ---- Connections (ABI 1.0) ----------------------------------------------
 * A keel_conn is valid from the protocol's on_open until its on_close
 * returns. All functions here run on the connection's worker thread. */

/* Queues bytes for writing without copying them: the buffers must stay
 * valid until cb (may be NULL) is called, exactly once. Writes leave in
 * order. Returns KEEL_ERR_CLOSED if the connection is closing (cb is not
 * called then). When the queue exceeds the high watermark, reading pauses
 * until it drains (protocol on_drain). */
KEEL_FN(int, conn_write,
        (keel_conn *conn, const keel_buf *bufs, size_t nbufs, keel_write_cb cb, void *userdata),
        (conn, bufs, nbufs, cb, userdata))

/* Copies len bytes and queues them. Returns KEEL_ERR_CLOSED or
 * KEEL_ERR_NOMEM. */
KEEL_FN(int, conn_write_copy, (keel_conn *conn, const void *data, size_t len),
        (conn, data, len))

/* Bytes queued and not yet written to the socket. */
KEEL_FN(size_t, conn_write_queued, (keel_conn *conn), (conn))

/* Closes in order: queued writes are flushed, then the connection is shut
 * down and closed, then on_close is called. Idempotent. */
KEEL_VFN(conn_close, (keel_conn *conn), (conn))

/* Closes at once, dropping queued writes (their callbacks get
 * KEEL_ERR_CLOSED). Idempotent. */
KEEL_VFN(conn_abort, (keel_conn *conn), (conn))

/* Stops delivering data (the socket is not read); buffered bytes and the
 * pointers on_data received stay valid. */
KEEL_VFN(conn_pause, (keel_conn *conn), (conn))

/* Resumes reading; bytes still buffered are delivered again soon (from the
 * loop, never from inside this call). */
KEEL_VFN(conn_resume, (keel_conn *conn), (conn))

/* Hands the connection to another protocol without copying its buffered
 * bytes: the new protocol's on_open(conn, arg) runs, then it receives every
 * byte the current protocol did not consume. The current protocol's
 * on_close is NOT called; it must release its own state first. Returns
 * KEEL_ERR_NOTFOUND for an unknown protocol. */
KEEL_FN(int, conn_set_protocol, (keel_conn *conn, const char *protocol, void *arg),
        (conn, protocol, arg))

/* The protocol's per-connection pointer (NULL until set). */
KEEL_VFN(conn_set_data, (keel_conn *conn, void *data), (conn, data))
KEEL_FN(void *, conn_data, (keel_conn *conn), (conn))

/* Sets the inactivity timeout: if nothing is read or written for timeout_ms
 * the protocol's on_timeout runs. 0 restores the server's idle_timeout.
 * Uses no per-connection timer. */
KEEL_VFN(conn_set_timeout, (keel_conn *conn, uint64_t timeout_ms), (conn, timeout_ms))

/* The module that registered the connection's current protocol: how a
 * protocol callback reaches its module's data and per-worker state. */
KEEL_FN(keel_module *, conn_module, (keel_conn *conn), (conn))

/* The worker that owns the connection. */
KEEL_FN(keel_worker *, conn_worker, (keel_conn *conn), (conn))

/* A number identifying the connection, unique within the process. */
KEEL_FN(uint64_t, conn_id, (keel_conn *conn), (conn))

/* Writes the peer's address as "1.2.3.4:5678" or "[::1]:5678" into buf
 * (always NUL-terminated). Returns KEEL_ERR_INVAL if it does not fit. */
KEEL_FN(int, conn_peer_name, (keel_conn *conn, char *buf, size_t size), (conn, buf, size))

/* The value of a listener option written as key=value after the protocol in
 * the `listen` line (e.g. "tls" as a bare word gives ""), or NULL. */
KEEL_FN(const char *, conn_listener_option, (keel_conn *conn, const char *key), (conn, key))

/* ---- Transports (ABI 1.0) -----------------------------------------------
 * For transport modules only; worker thread of the connection. */

/* The transport's per-connection pointer. */
KEEL_VFN(conn_set_transport_data, (keel_conn *conn, void *data), (conn, data))
KEEL_FN(void *, conn_transport_data, (keel_conn *conn), (conn))

/* Passes decoded bytes up to the protocol (they are copied into the
 * connection's read buffer). */
KEEL_FN(int, transport_deliver, (keel_conn *conn, const void *data, size_t len),
        (conn, data, len))

/* Queues encoded bytes for the socket, copying them. */
KEEL_FN(int, transport_send, (keel_conn *conn, const void *data, size_t len), (conn, data, len))
