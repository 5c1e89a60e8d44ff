/* keel/api_list.h — every function the host offers to modules, in table order.
 *
 * This file is the single list from which the host's function table, the
 * module-side wrappers and libkeel's exported prototypes are generated (see
 * keel/api.h). It is included several times with different definitions of
 *     KEEL_FN(return_type, name, (parameters), (arguments))
 *     KEEL_VFN(name, (parameters), (arguments))       for void functions
 * and so has no include guard. Each entry becomes keel_<name>().
 *
 * Each ABI minor's entries sit inside `#if KEEL__WANT(minor)`; the includer
 * defines KEEL__WANT to pick the entries it generates (keel/api.h: the ones
 * a module's KEEL_TARGET_ABI_MINOR has, then the ones it lacks, declared
 * unavailable so that calling them does not compile).
 *
 * ABI RULE: entries are only ever appended at the end, with KEEL_ABI_MINOR
 * bumped. Never reorder, remove or change an entry's signature.
 *
 * Threads: "main" is the thread that runs keel_server_run() (module load and
 * unload happen there); "worker" is a connection's or timer's own worker
 * thread. Calling a function from a thread it does not allow is undefined.
 */
/* clang-format off */

#if KEEL__WANT(0)

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
 * storage is the usual choice).
 *
 * Services: a module publishes a table in its load; another looks it up
 * in its own load (only then: the registry is not for workers) and keeps
 * the pointer. Modules unload in reverse load order, so a table found
 * this way stays valid until the consumer's unload has returned. Calling
 * the table's functions follows the service's own contract, which says on
 * which threads (typically any worker, on that worker's objects) and what
 * locking, if any, it does: the core neither checks nor serialises. */

/* Registers a connection protocol under protocol->name. */
KEEL_FN(int, protocol_register, (keel_module *module, const keel_protocol *protocol),
        (module, protocol))

/* Registers a transport under transport->name. */
KEEL_FN(int, transport_register, (keel_module *module, const keel_transport *transport),
        (module, transport))

/* Publishes a named, versioned table of functions for other modules. By
 * convention the table starts with a size_t holding its own size. The
 * table must stay valid until this module's unload returns. */
KEEL_FN(int, service_publish,
        (keel_module *module, const char *name, uint32_t version, const void *table),
        (module, name, version, table))

/* Looks up a service published by a module loaded earlier (name it in
 * the descriptor's `dependencies` to be sure). Fails with KEEL_ERR_NOTFOUND if absent and
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

/* The number of workers of the server the worker belongs to. Any thread.
 * (In load, before any worker exists: keel_module_worker_count, ABI 1.3.) */
KEEL_FN(unsigned, worker_count, (keel_worker *worker), (worker))

/* The loop's cached time in milliseconds (monotonic, arbitrary origin),
 * updated once per loop iteration. Worker thread. */
KEEL_FN(uint64_t, worker_now_ms, (keel_worker *worker), (worker))

/* Runs fn(worker, userdata) on the worker's thread soon. Any thread; this is
 * how work done elsewhere resumes on the owning loop. Fails with
 * KEEL_ERR_SHUTDOWN once the worker is stopping its modules (fn is then
 * never called) and KEEL_ERR_NOMEM. A posted fn always runs before the
 * module's stop() on that worker. The keel_worker pointer itself stays
 * valid until the module's unload() returns. */
KEEL_FN(int, worker_post, (keel_worker *worker, keel_post_fn fn, void *userdata),
        (worker, fn, userdata))

/* Non-zero once a graceful shutdown has begun. Any thread. Since ABI 1.5
 * the value says why: KEEL_STOPPING (1) for a stop, KEEL_STOPPING_REPLACED
 * (2) when this process is draining because a reload's new process has
 * taken over the listening sockets: the service goes on (a readiness
 * probe should still say ready), only this process winds down. */
KEEL_FN(int, worker_stopping, (keel_worker *worker), (worker))

/* ---- Timers (ABI 1.0) -------------------------------------------------- */

/* Calls cb after timeout_ms, then every repeat_ms if that is non-zero. The
 * timer belongs to the worker and runs on its thread; it is freed by
 * keel_timer_stop or when the worker stops. Returns NULL if out of memory.
 * Worker thread.
 *
 * A graceful stop does not stop timers: the worker runs until its last
 * connection is gone, and a repeating timer keeps firing all through that
 * drain (a module's keepalive pinging an upstream, say). Stop what should
 * not run then from the descriptor's `stopping` hook (ABI 1.8), or from
 * stop(): keel_timer_stop is valid there, as stop runs before the worker
 * frees the timers left, which it does without calling them again. */
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

/* Queues bytes for writing without copying them: the bytes the buffers
 * point at must stay valid until cb (may be NULL) is called, exactly once.
 * The keel_buf array itself is read during the call only (what the core
 * keeps of it, it copies), so it may live on the caller's stack. Writes
 * leave in order. Returns KEEL_ERR_CLOSED if the connection is closing (cb is not
 * called then). When the queue exceeds the high watermark, reading pauses
 * until it drains (protocol on_drain). cb comes once the bytes have left,
 * or, through a transport (which copies them), once the connection's
 * queue is down to 64 KiB: a caller that writes again from cb is paced by
 * the peer either way. */
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
 * KEEL_ERR_CLOSED); on TCP with a reset (SO_LINGER 0, since ABI 1.4), so
 * that the kernel frees at once what it held for the peer (a peer that
 * stopped reading). Idempotent. */
KEEL_VFN(conn_abort, (keel_conn *conn), (conn))

/* Stops delivering data (the socket is not read); buffered bytes and the
 * pointers on_data received stay valid. */
KEEL_VFN(conn_pause, (keel_conn *conn), (conn))

/* Resumes reading; bytes still buffered (unconsumed) are delivered again
 * soon (from the loop, never from inside this call), even if no new byte
 * arrives. */
KEEL_VFN(conn_resume, (keel_conn *conn), (conn))

/* Hands the connection to another protocol without copying its buffered
 * bytes: the new protocol's on_open(conn, arg) runs, then it receives every
 * byte the current protocol did not consume (reading is resumed if it was
 * paused). The current protocol's on_close is NOT called: it releases its
 * own state once this returns KEEL_OK (or passes it on through arg). On
 * KEEL_ERR_NOTFOUND (unknown protocol) or KEEL_ERR_CLOSED nothing changed. */
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
 * (always NUL-terminated). Returns KEEL_ERR_INVAL if it does not fit, and
 * KEEL_ERR_CLOSED with "" once the socket is closed: from an abort, or the
 * end of an orderly close, on; in on_close always (but for the client
 * address a PROXY protocol header gave, which the connection holds; and
 * a tunnel asks its carrier). The address is read
 * from the socket, not kept (keeping it would cost every idle connection
 * its bytes, and a system call per close): a protocol that logs it at the
 * close copies it in on_open. (A request keeps its own copy:
 * keel_request_peer_name works until the request is released.) Worker
 * thread of the connection. */
KEEL_FN(int, conn_peer_name, (keel_conn *conn, char *buf, size_t size), (conn, buf, size))

/* The value of a listener option written as key=value after the protocol in
 * the `listen` line (e.g. "tls" as a bare word gives ""), or NULL. */
KEEL_FN(const char *, conn_listener_option, (keel_conn *conn, const char *key), (conn, key))

/* ---- Transports (ABI 1.0) -----------------------------------------------
 * For transport modules only; worker thread of the connection. */

/* The transport's per-connection pointer. A connection without a
 * transport has none: NULL, and setting it does nothing. */
KEEL_VFN(conn_set_transport_data, (keel_conn *conn, void *data), (conn, data))
KEEL_FN(void *, conn_transport_data, (keel_conn *conn), (conn))

/* Passes decoded bytes up to the protocol (they are copied into the
 * connection's read buffer); outside on_read, the delivery is scheduled. */
KEEL_FN(int, transport_deliver, (keel_conn *conn, const void *data, size_t len),
        (conn, data, len))

/* Queues encoded bytes for the socket, copying them. */
KEEL_FN(int, transport_send, (keel_conn *conn, const void *data, size_t len), (conn, data, len))

#endif /* KEEL__WANT(0) */

#if KEEL__WANT(1)

/* ---- HTTP: requests (ABI 1.1) ---------------------------------------------
 * For handlers and filters; worker thread of the request. A keel_request
 * and its keel_response are valid from the first filter until the log phase
 * returns. Views (keel_str) point into the request and share its lifetime
 * unless said otherwise. */

/* The method as sent ("GET"). */
KEEL_FN(keel_str, request_method, (keel_request *req), (req))

/* The request-target as sent, e.g. "/a%20b?x=1". */
KEEL_FN(keel_str, request_target, (keel_request *req), (req))

/* The path, percent-decoded and with "." and ".." segments resolved; always
 * starts with "/". Requests whose path decodes to a NUL byte or climbs above
 * the root are refused with 400 before any handler runs. The router
 * matches this decoded path, so an encoded slash (%2F) splits segments
 * like "/" and a ":param" never holds one: a route that must see it takes
 * a wildcard (a pattern ending in "*") and splits keel_request_target
 * itself. */
KEEL_FN(keel_str, request_path, (keel_request *req), (req))

/* The raw query after '?', without it; ptr is NULL if there is none. */
KEEL_FN(keel_str, request_query, (keel_request *req), (req))

/* The first query parameter called name, percent-decoded ('+' is a space).
 * KEEL_ERR_NOTFOUND if absent; out->ptr is then NULL. */
KEEL_FN(int, request_query_param, (keel_request *req, const char *name, keel_str *out),
        (req, name, out))

/* The first header called name (case-insensitive); ptr NULL if absent. */
KEEL_FN(keel_str, request_header, (keel_request *req, const char *name), (req, name))

/* Headers in the order received. */
KEEL_FN(size_t, request_header_count, (keel_request *req), (req))
KEEL_FN(int, request_header_at, (keel_request *req, size_t index, keel_header *out),
        (req, index, out))

/* A route parameter (":name" in the pattern, "*" for the wildcard's match),
 * percent-decoded; ptr NULL if the route has no such parameter. */
KEEL_FN(keel_str, request_param, (keel_request *req, const char *name), (req, name))

/* 10 for HTTP/1.0, 11 for HTTP/1.1, 20 for HTTP/2. */
KEEL_FN(int, request_version, (keel_request *req), (req))

/* The connection the request came on (NULL once the client has left,
 * ABI 1.6). Deprecated for handlers and filters since ABI 1.7: the
 * connection is the protocol's, shared by every stream of an HTTP/2
 * connection and gone when the client leaves. Ask the request instead:
 * keel_request_worker, keel_request_peer_name / _peer_ip,
 * keel_request_scheme, keel_request_transport_name, keel_request_conn_id,
 * keel_request_body_pause, keel_request_on_abort. What is the
 * connection's own (a TLS client certificate, keel/tls.h) is still asked
 * of it, while the exchange is alive. Define
 * KEEL_WARN_DEPRECATED before including keel/keel.h to have the compiler
 * point at the calls left. Kept, and working, for the modules built
 * before. */
KEEL_FN(keel_conn *, request_conn, (keel_request *req), (req))

/* Reads the whole body, up to max bytes (0: the protocol's limit), then
 * calls cb. A larger body is answered 413 (cb gets KEEL_ERR_LIMIT). Call at
 * most once, and not together with keel_request_stream_body.
 * max can only lower the limit: the protocol's own max_body ([http1] /
 * [h2] max_body, 1m by default) is enforced first, whatever max says, so
 * a module that accepts larger uploads says so in the docs and the
 * operator raises max_body. keel_request_body_limit (ABI 1.8) gives the
 * protocol's limit for this request. */
KEEL_FN(int, request_read_body,
        (keel_request *req, uint64_t max, keel_body_cb cb, void *userdata),
        (req, max, cb, userdata))

/* The body read by keel_request_read_body (ptr NULL before it completed;
 * an empty body has ptr non-NULL and len 0). */
KEEL_FN(keel_str, request_body, (keel_request *req), (req))

/* Delivers the body piece by piece as it arrives. */
KEEL_FN(int, request_stream_body, (keel_request *req, keel_body_chunk_cb cb, void *userdata),
        (req, cb, userdata))

/* One pointer of per-request data for each module (filters use it to pass
 * state from one phase to the next). The module frees it, at the latest in
 * its on_log. */
KEEL_VFN(request_set_data, (keel_request *req, keel_module *module, void *data),
         (req, module, data))
KEEL_FN(void *, request_data, (keel_request *req, keel_module *module), (req, module))

/* Runs work(userdata) on libuv's thread pool, then done(req, status,
 * userdata) back on the request's worker. The request stays valid until
 * done returns. KEEL_ERR_NOMEM, or KEEL_ERR_STATE if an offload is already
 * running for this request. */
KEEL_FN(int, offload,
        (keel_request *req, keel_offload_fn work, keel_offload_done_fn done, void *userdata),
        (req, work, done, userdata))

/* ---- HTTP: responses (ABI 1.1) --------------------------------------------
 * Headers can be changed until the head is sent (the first body byte, or
 * the end); after that these return KEEL_ERR_STATE. Names are tokens
 * (RFC 9110 5.1); a value containing CR, LF or NUL is refused with
 * KEEL_ERR_INVAL, so a handler can never split a response. Strings are
 * copied. */

/* 200 unless set; 100..599 (RFC 9110 15: no valid status lies beyond;
 * 600..999 were taken before 1.6), except 101: switching protocols is
 * keel_response_upgrade (KEEL_ERR_INVAL here). */
KEEL_FN(int, response_set_status, (keel_response *res, int status), (res, status))
KEEL_FN(int, response_status, (keel_response *res), (res))

/* Replaces every header called name with one. */
KEEL_FN(int, response_header_set, (keel_response *res, const char *name, const char *value),
        (res, name, value))

/* Adds one more header (Set-Cookie, say). */
KEEL_FN(int, response_header_add, (keel_response *res, const char *name, const char *value),
        (res, name, value))

/* Removes every header called name; KEEL_ERR_NOTFOUND if there was none. */
KEEL_FN(int, response_header_remove, (keel_response *res, const char *name), (res, name))

/* The first response header called name (case-insensitive); ptr NULL if
 * absent. Valid until the headers change. */
KEEL_FN(keel_str, response_header, (keel_response *res, const char *name), (res, name))

/* Sends the whole body and ends the response. The bytes are borrowed:
 * free_fn(data, userdata) is called once they are no longer needed (at once
 * on error); with free_fn NULL they must simply outlive the response. */
KEEL_FN(int, response_send,
        (keel_response *res, const void *data, size_t len, keel_free_fn free_fn, void *userdata),
        (res, data, len, free_fn, userdata))

/* The same with the bytes copied. */
KEEL_FN(int, response_send_copy, (keel_response *res, const void *data, size_t len),
        (res, data, len))

/* Ends the response with the status's standard short text body (404 Not
 * Found, ...), replacing the status (100..599, not 101). */
KEEL_FN(int, response_send_status, (keel_response *res, int status), (res, status))

/* Sends length bytes of an open file from offset and ends the response;
 * the core closes fd afterwards if close_fd. Uses sendfile where the
 * protocol and transport allow it (plain TCP, a length-framed body and no
 * body filter); otherwise the file is read in pieces on the thread pool.
 * If the file turns out shorter than length, the connection is closed (the
 * client sees a truncated body). */
KEEL_FN(int, response_send_file,
        (keel_response *res, int fd, uint64_t offset, uint64_t length, int close_fd),
        (res, fd, offset, length, close_fd))

/* Streams a piece of the body (chunked on HTTP/1.1 unless a Content-Length
 * was set). The bytes are borrowed until free_fn is called, which also
 * tells that the peer is keeping up: write the next piece from there to
 * stream at the peer's pace (free_fn may run inside this call). A negative
 * return (KEEL_ERR_CLOSED: the client left) ends the response: the request
 * must not be used after it. */
KEEL_FN(int, response_write,
        (keel_response *res, const void *data, size_t len, keel_free_fn free_fn, void *userdata),
        (res, data, len, free_fn, userdata))

/* A trailer field, sent with the end of a streamed (chunked) response. */
KEEL_FN(int, response_trailer_add, (keel_response *res, const char *name, const char *value),
        (res, name, value))

/* Ends a streamed response. */
KEEL_FN(int, response_end, (keel_response *res), (res))

/* Asks for the connection to close once this response is sent (so does
 * a "Connection: close" field: the core turns it into this request and
 * leaves the field itself to the protocol, see
 * keel_http_request_keep_alive). */
KEEL_VFN(response_close_connection, (keel_response *res), (res))

/* For on_response_body filters only: passes bytes on to the next filter
 * (and finally to the protocol). The bytes need only live until the call
 * returns. */
KEEL_FN(int, response_filter_emit,
        (keel_response *res, const keel_buf *bufs, size_t nbufs, int last),
        (res, bufs, nbufs, last))

/* ---- HTTP: routes and filters (ABI 1.1) -----------------------------------
 * From load (main thread) only. */

/* Routes method + pattern to handler. method is a token such as "GET", or
 * "*" for any method. pattern segments are literal, ":name" (one segment)
 * or a final "*" (the rest of the path). The most specific route wins:
 * literal over parameter over wildcard, segment by segment. A path that
 * matches only other methods' routes is answered 405 with Allow; a path
 * that matches nothing, 404. GET routes also answer HEAD. */
KEEL_FN(int, route_add,
        (keel_module *module, const char *method, const char *pattern, keel_http_handler handler,
         void *userdata),
        (module, method, pattern, handler, userdata))

/* Adds a filter (see keel_http_filter); the struct is borrowed until
 * unload. */
KEEL_FN(int, http_filter_add, (keel_module *module, const keel_http_filter *filter),
        (module, filter))

/* ---- HTTP: for protocol modules (ABI 1.1) --------------------------------- */

/* A request head was parsed on conn: creates the request. The head and its
 * views must stay valid until sink->done. NULL if out of memory. */
KEEL_FN(keel_request *, http_request_start,
        (keel_conn *conn, const keel_http_sink *sink, void *exchange, const keel_http_head *head),
        (conn, sink, exchange, head))

/* Runs the exchange: request filters, router, handler. Answers 400 itself
 * for an invalid path. */
KEEL_VFN(http_request_dispatch, (keel_request *req), (req))

/* Body bytes of the request, after sink->want_body (the data is copied or
 * consumed during the call); last marks the end of the body. */
KEEL_FN(int, http_request_body, (keel_request *req, const char *data, size_t len, int last),
        (req, data, len, last))

/* The connection is gone: the core finishes the exchange without calling
 * the sink again (pending body and offload callbacks see KEEL_ERR_CLOSED)
 * and frees the request when nothing refers to it any more. */
KEEL_VFN(http_request_abort, (keel_request *req), (req))

/* The reason phrase of a status ("Not Found"), or "" for an unknown one. */
KEEL_FN(const char *, http_reason, (int status), (status))

/* ---- Appending to files without blocking (ABI 1.1) ------------------------
 * For access logs and the like: writes are buffered in memory and written
 * by a background thread, so a slow disk never stalls a loop. */

/* Opens (creating, appending) a file for keel_appender_write. Main thread,
 * from load; the file is closed after unload. NULL on error (logged). */
KEEL_FN(keel_appender *, appender_open, (keel_module *module, const char *path), (module, path))

/* Queues len bytes to be appended. Any thread; never blocks on I/O. If
 * more than 4 MiB are waiting the bytes are dropped (and counted in a
 * warning when the file closes), returning KEEL_ERR_LIMIT. */
KEEL_FN(int, appender_write, (keel_appender *appender, const void *data, size_t len),
        (appender, data, len))

/* ---- Wall-clock time (ABI 1.1) -------------------------------------------- */

/* Seconds since the Unix epoch (UTC). Any thread. */
KEEL_FN(int64_t, time_now, (void), ())

/* Formats a Unix time in UTC: KEEL_TIME_HTTP "Sun, 06 Nov 1994 08:49:37 GMT"
 * (RFC 9110 5.6.7), KEEL_TIME_CLF "06/Nov/1994:08:49:37 +0000" (access
 * logs), KEEL_TIME_ISO "1994-11-06T08:49:37Z". Returns the length written
 * (buf is NUL-terminated), or 0 if size is too small. Any thread. */
KEEL_FN(size_t, time_format, (int64_t unix_seconds, int style, char *buf, size_t size),
        (unix_seconds, style, buf, size))

#endif /* KEEL__WANT(1) */

#if KEEL__WANT(2)

/* ---- Connections: files (ABI 1.2) ------------------------------------------ */

/* Writes bytes [offset, offset + length) of an open file to the connection,
 * in order: after everything written before this call and before anything
 * written after it (the core holds later keel_conn_write* calls, and later
 * files, in its own queue until this one has gone; they count as queued
 * bytes). On plain TCP the bytes go from the file to the socket with
 * sendfile(2) where the system has it (Linux, macOS, FreeBSD), without
 * passing through the process. Through a transport (TLS), or where there
 * is no sendfile (Windows), the core reads the file in 64 KiB pieces on
 * libuv's thread pool and writes each as keel_conn_write would.
 *
 * fd stays the caller's: the core neither closes it nor moves its file
 * position (it reads at explicit offsets); keep it open until cb. The bytes
 * not yet sent count in keel_conn_write_queued and against write_high_water,
 * and the server's write_timeout applies while they wait.
 *
 * cb (may be NULL) is called exactly once, on the worker thread, never from
 * inside this call: KEEL_OK once the last byte has left; KEEL_ERR_IO if the
 * file turned out shorter than offset + length, a read failed or the socket
 * did; KEEL_ERR_CLOSED if the connection closed (or timed out) first. A
 * failed transfer aborts the connection: the peer would otherwise take what
 * follows for the rest of the file.
 *
 * Returns KEEL_ERR_CLOSED if the connection is closing, KEEL_ERR_INVAL for
 * a negative fd or a range beyond 2^63, KEEL_ERR_NOMEM; cb is then never
 * called. Worker thread of the connection. */
KEEL_FN(int, conn_write_file,
        (keel_conn *conn, int fd, uint64_t offset, uint64_t length, keel_write_cb cb,
         void *userdata),
        (conn, fd, offset, length, cb, userdata))
#endif /* KEEL__WANT(2) */

#if KEEL__WANT(3)

/* ---- Modules and configuration (ABI 1.3) ------------------------------- */

/* Reports a bad value of one of the module's own keys the way the core's
 * getters do: logs "FILE:LINE: [section] key: message" naming the key's
 * (last) occurrence, or the section's line if the key is absent, or just
 * "[section] key: message" if the module has no section. Returns
 * KEEL_ERR_CONFIG, so that load can `return keel_config_error(...)`. Use
 * the printf-style wrapper keel_config_error(). Main thread, from load. */
KEEL_FN(int, config_errorv,
        (keel_module *module, const char *key, const char *fmt, va_list ap),
        (module, key, fmt, ap))

/* A short English description of a keel_status value ("connection
 * closed"); "unknown error" for anything else. Never NULL; static
 * storage. Any thread. */
KEEL_FN(const char *, strerror, (int status), (status))

/* How many workers the server runs, known from load on (so a module can
 * size what it shares between them before any worker starts). Any
 * thread. */
KEEL_FN(unsigned, module_worker_count, (keel_module *module), (module))

/* ---- Timers and work off the loop (ABI 1.3) ---------------------------- */

/* Re-arms a timer to fire after timeout_ms, then every repeat_ms if that
 * is non-zero, whether it was pending, repeating or had already fired (a
 * one-shot timer stays valid until keel_timer_stop). No allocation: this
 * is the cheap way to push a deadline back. Safe inside the timer's own
 * callback. KEEL_ERR_SHUTDOWN once the worker is stopping its modules.
 * Worker thread of the timer. */
KEEL_FN(int, timer_restart, (keel_timer *timer, uint64_t timeout_ms, uint64_t repeat_ms),
        (timer, timeout_ms, repeat_ms))

/* Runs work(userdata) on libuv's thread pool (it may block; it must not
 * call keel functions bound to the worker thread: keel_log and
 * keel_worker_post, which any thread may call, are fine), then
 * done(worker, status, userdata) back on the worker's thread: status
 * KEEL_OK, or KEEL_ERR_SHUTDOWN when the worker is stopping by then (done
 * still runs, and should only release). work always runs, exactly once.
 * A graceful stop waits for every done before the modules' stop() on
 * that worker; the shutdown deadline does not cut work short (a thread of
 * the pool cannot be interrupted). Not tied to a request: for protocol
 * modules, timers, anything. Returns KEEL_ERR_INVAL (work or done NULL),
 * KEEL_ERR_SHUTDOWN once the worker is stopping its modules (from stop(),
 * say; during the graceful stop before that, offloads are accepted),
 * KEEL_ERR_NOMEM; done is then never called. Worker thread. */
KEEL_FN(int, worker_offload,
        (keel_worker *worker, keel_offload_fn work, keel_work_done_fn done, void *userdata),
        (worker, work, done, userdata))

/* ---- Connections (ABI 1.3) --------------------------------------------- */

/* Drops len bytes from the front of the connection's unconsumed input, as
 * if on_data had reported them consumed: for a protocol that finishes
 * with bytes outside on_data (an exchange decided later, then handed
 * over). The rest stays buffered and is presented again as on_data
 * promises. KEEL_ERR_INVAL if fewer than len bytes are buffered (nothing
 * is dropped then), KEEL_ERR_STATE inside on_data (use *consumed there).
 * Worker thread of the connection. */
KEEL_FN(int, conn_consume, (keel_conn *conn, size_t len), (conn, len))

/* Opens a connection from this worker (a reverse proxy's upstream, a
 * Redis link, a health check). The host name is resolved off the loop
 * (getaddrinfo on libuv's thread pool; a numeric IPv4 or IPv6 address
 * skips that), each address is tried in turn, in the resolver's order,
 * all within options->timeout_ms (0: the server's [keel] connect_timeout),
 * and once connected (through options->transport, if named) the
 * connection is driven like an accepted one: the transport's on_open,
 * the protocol's on_open(conn, options->arg), then on_data, on_drain,
 * on_timeout, on_close as usual. If it cannot be made,
 * options->on_error(worker, status, options->arg) runs instead:
 * KEEL_ERR_NOTFOUND (the name does not resolve, or to no TCP address),
 * KEEL_ERR_REFUSED (every address refused), KEEL_ERR_TIMEOUT (the
 * deadline passed), KEEL_ERR_SHUTDOWN (the worker began a graceful stop
 * first), KEEL_ERR_NOMEM, KEEL_ERR_LIMIT (the process is out of file
 * descriptors: says nothing about the host; since 1.6, KEEL_ERR_IO
 * before), KEEL_ERR_IO (anything else: unreachable, mixed
 * failures, the transport's on_open refused). Exactly one of the
 * protocol's on_open and on_error is called, never from inside this call,
 * unless the attempt is cancelled first. (An on_open that fails has
 * answered too: the connection then closes without on_close.)
 *
 * Since 1.9 a host "unix:PATH" (or "unix:@NAME", Linux's abstract
 * namespace) is a Unix domain socket: the port is ignored (0 allowed),
 * nothing is resolved, and the socket connects at once or fails
 * (KEEL_ERR_REFUSED when nobody listens or there is no such path,
 * KEEL_ERR_IO for a listener whose queue is full, as nginx; still never
 * from inside this call); KEEL_ERR_UNSUPPORTED on Windows, KEEL_ERR_INVAL
 * for a name too long for sun_path (both through on_error). A keel
 * older than 1.9 tries to resolve such a name and answers
 * KEEL_ERR_NOTFOUND.
 *
 * The options and the strings they point to are copied; a module built
 * against a smaller keel_connect_options gets zero for the fields it
 * lacks. *out (may be NULL) receives a handle valid until on_open or
 * on_error is called, for keel_connect_cancel; the core frees it. Returns
 * KEEL_ERR_INVAL (options NULL, no host, port 0 or over 65535, unknown
 * protocol or transport, no on_error), KEEL_ERR_SHUTDOWN (the worker is
 * stopping), KEEL_ERR_NOMEM; nothing is called then. Outbound connections
 * count in the worker's connections but in no max_connections; a
 * graceful shutdown asks their protocol to finish (on_shutdown) as for
 * any other, and aborts them at its deadline. Worker thread. */
KEEL_FN(int, conn_connect,
        (keel_worker *worker, const keel_connect_options *options, keel_connect **out),
        (worker, options, out))

/* Gives up an attempt still in progress: neither on_open nor on_error
 * will be called. What is in flight stops (the resolver request is
 * cancelled, or its late answer dropped; the connecting socket is
 * closed; a transport's handshake, TLS, is abandoned and its connection
 * closed) and the core frees the handle: do not use it again. Only before
 * on_open or on_error has run. Worker thread. */
KEEL_VFN(connect_cancel, (keel_connect *connect), (connect))

/* For a connection keel opened with keel_conn_connect: the host it was
 * asked to reach (for TLS server-name indication and certificate checks).
 * NULL for an accepted connection, which is how a transport tells the two
 * apart. Valid as long as the connection. */
KEEL_FN(const char *, conn_remote_host, (keel_conn *conn), (conn))

/* ---- HTTP (ABI 1.3) ---------------------------------------------------- */

/* Turns the exchange into another protocol (RFC 9110 7.8): the response
 * head filters run (with status 101, which they cannot change), then the
 * protocol module sends 101 Switching Protocols with the fields set on res
 * (Upgrade, naming what is switched to, and the new protocol's own, e.g.
 * Sec-WebSocket-Accept; Content-Length, Transfer-Encoding and Connection
 * are the protocol's to write and are dropped), releases its exchange and
 * hands the connection to `protocol` (its on_open(conn, arg) runs) with
 * the bytes that followed the request, without copying them: what the
 * client sent right behind the request, pipelined requests included, is
 * the new protocol's. The log phase then runs (status 101) and the request
 * and response are gone: arg must not point into them.
 *
 * Call once, instead of sending a response, from the handler or later (a
 * timer, an offload's completion): either way the new protocol never sees
 * the request itself. KEEL_OK once the connection is the new protocol's,
 * even if its on_open then refuses it (arg is on_open's to release from
 * then on). Otherwise nothing was sent, arg stays the caller's, and the
 * response is as the handler left it (the head filters may have run), so
 * the handler can answer normally:
 *   KEEL_ERR_NOTFOUND     no protocol of that name is registered;
 *   KEEL_ERR_UNSUPPORTED  this exchange cannot switch: its protocol has no
 *                         upgrade (HTTP/2), an HTTP/1.0 request (RFC 9110
 *                         7.8), an HTTP/1.1 request that did not ask for
 *                         one (an Upgrade field and Connection: upgrade);
 *   KEEL_ERR_STATE        a response was begun, or the request has a body
 *                         that was not read whole (read it first);
 *   KEEL_ERR_INVAL        protocol is NULL, or res has no Upgrade field
 *                         where the protocol needs one (HTTP/1.1, RFC 9110
 *                         15.2.2);
 *   KEEL_ERR_SHUTDOWN     the server is stopping;
 *   KEEL_ERR_NOMEM;
 *   KEEL_ERR_CLOSED       the client left, or the connection broke while
 *                         switching: the request is gone (as after any
 *                         response call that returns it).
 * Worker thread of the request. */
KEEL_FN(int, response_upgrade, (keel_response *res, const char *protocol, void *arg),
        (res, protocol, arg))

/* For HTTP protocol modules: 1 while nothing in the core asks for the
 * connection to end after this exchange, 0 once the handler, a filter or
 * the core did (keel_response_close_connection, or a response field
 * "Connection: close", which the core takes out of the head: it never
 * hands a protocol connection-specific fields, RFC 9110 7.6.1). Ask from
 * the sink's send_head: HTTP/1.1 then writes "Connection: close" and
 * closes after the response; HTTP/2 can finish the stream and send GOAWAY
 * (RFC 9113 6.8). The protocol's own reasons (what the client asked, its
 * limits, a shutdown) are not included; done's keep_alive is the final
 * word, as a response cut short after its head asks to close too.
 * req is one the protocol started (keel_http_request_start), before its
 * done or abort; it stays the core's. Never fails and allocates nothing.
 * Worker thread of the request. */
KEEL_FN(int, http_request_keep_alive, (keel_request *req), (req))
#endif /* KEEL__WANT(3) */

#if KEEL__WANT(4)

/* ---- Metrics (ABI 1.4) --------------------------------------------------
 * The types are in keel/metrics.h, which says what the API is for. */

/* Registers one series (a family's name plus labels) and gives its handle
 * in *out. Main thread, from load only (every worker's storage is laid out
 * before the workers start). KEEL_ERR_INVAL for a bad name, type, labels
 * or bounds, or a series whose family was registered with another type
 * (or, for histograms, other bounds); KEEL_ERR_EXISTS for a series
 * registered twice; KEEL_ERR_STATE after load; KEEL_ERR_NOMEM. The core's
 * own families start with "keel_" (docs/metrics.md lists them). */
KEEL_FN(int, metric_register,
        (keel_module *module, const keel_metric_desc *desc, keel_metric **out),
        (module, desc, out))

/* Adds delta to this worker's copy: a counter (delta >= 0) or a gauge
 * (any delta). No lock and no atomic read-modify-write. NULL metric: no
 * effect. Worker thread of `worker` only (never a pool thread: post back
 * first). */
KEEL_VFN(metric_add, (keel_worker *worker, keel_metric *metric, int64_t delta),
         (worker, metric, delta))

/* Sets this worker's copy of a gauge (the sum over workers is what is
 * read). Worker thread of `worker`. */
KEEL_VFN(metric_set, (keel_worker *worker, keel_metric *metric, int64_t value),
         (worker, metric, value))

/* Counts one observation in a histogram: its bucket, count and sum.
 * Worker thread of `worker`. */
KEEL_VFN(metric_observe, (keel_worker *worker, keel_metric *metric, int64_t value),
         (worker, metric, value))

/* Reads every registered series, the core's included, and calls fn for
 * each value (keel/metrics.h: order, flags). Values are read without
 * stopping the workers: each is exact, a collection is not a snapshot
 * taken at one instant. KEEL_ERR_STATE before the workers exist (in load).
 * Any thread; fn runs on the calling thread. From ABI 1.9 the modules'
 * metrics sources (keel_metrics_source_register) follow the registered
 * families, once each, their samples with worker KEEL_METRIC_ALL_WORKERS
 * in either flag's collection. */
KEEL_FN(int, metrics_collect,
        (keel_module *module, unsigned flags, keel_metric_visit_fn fn, void *userdata),
        (module, flags, fn, userdata))

/* ---- Transports that choose the protocol (ABI 1.4) ------------------------ */

/* For a transport whose on_open returned KEEL_TRANSPORT_DEFER: opens the
 * connection's protocol now, typically after a handshake that negotiated
 * it (TLS ALPN, RFC 7301). protocol NULL means the one the connection was
 * made for (the listener's, or keel_conn_connect's); otherwise a
 * registered protocol replaces it. Its on_open(conn, arg) runs (arg is
 * keel_conn_connect's for an outbound connection, NULL otherwise), then it
 * receives what the transport delivered meanwhile. Until then delivered
 * bytes wait, the connection's timeout closes it (set a handshake timeout
 * with keel_conn_set_timeout, and 0 once open), a graceful shutdown
 * closes it, and an outbound connection that ends unopened gets its
 * on_error(KEEL_ERR_IO). KEEL_ERR_STATE if the protocol is not deferred
 * (or already open), KEEL_ERR_NOTFOUND for an unknown protocol (nothing
 * changed: open another, or close), KEEL_ERR_CLOSED if the connection is
 * closing. Worker thread of the connection. */
KEEL_FN(int, transport_open_protocol, (keel_conn *conn, const char *protocol),
        (conn, protocol))

/* The name of the protocol the connection speaks (or, while its transport
 * defers it, the one it was made for: the listener's, or
 * keel_conn_connect's), and of its transport (NULL for plain TCP): a
 * transport offers ALPN ids that fit the listener's protocol, a service
 * (tls.h) tells its own connections from others. Static strings valid as
 * long as the connection. Worker thread of the connection. */
KEEL_FN(const char *, conn_protocol_name, (keel_conn *conn), (conn))
KEEL_FN(const char *, conn_transport_name, (keel_conn *conn), (conn))

/* 1 if a protocol of that name is registered, else 0: what a transport
 * may offer in ALPN. Any thread, once every module has loaded (from
 * start() or later). */
KEEL_FN(int, protocol_available, (keel_module *module, const char *name), (module, name))

/* ---- Files (ABI 1.4) ------------------------------------------------------ */

/* keel_conn_write_file preceded by the bytes in prefix (copied during the
 * call; a response head, typically): the same as keel_conn_write_copy of
 * each prefix buffer followed by keel_conn_write_file, with one callback
 * for the whole, except that on plain TCP, when nothing else is queued,
 * the prefix is sent marked as followed by more (Linux MSG_MORE) so that it
 * and the file's first bytes leave in one segment, as nginx's TCP_CORK
 * does: a small file's response costs the client one wake-up, not two.
 * Returns and calls back as keel_conn_write_file does (KEEL_ERR_INVAL also
 * for a NULL prefix with nprefix > 0). Worker thread of the connection. */
KEEL_FN(int, conn_write_file_after,
        (keel_conn *conn, const keel_buf *prefix, size_t nprefix, int fd, uint64_t offset,
         uint64_t length, keel_write_cb cb, void *userdata),
        (conn, prefix, nprefix, fd, offset, length, cb, userdata))

/* ---- Configuration (ABI 1.4) -------------------------------------------- */

/* Resolves `path`, a file or directory name the module read from the
 * index-th value of `key` (a word of it, say), as keel resolves its own
 * module_path: relative to the folder of the config file that holds that
 * value (as nginx's include), unchanged if absolute or if the value came
 * from --set or a config held in memory (then relative to the working
 * directory). Writes the result to buf (NUL-terminated). KEEL_ERR_NOTFOUND
 * if the key has no index-th value, KEEL_ERR_INVAL if buf is too small.
 * Main thread, from load. */
KEEL_FN(int, config_path,
        (keel_module *module, const char *key, size_t index, const char *path, char *buf,
         size_t size),
        (module, key, index, path, buf, size))

/* ---- HTTP filters (ABI 1.4) -------------------------------------------- */

/* From a filter's on_response_head: this filter leaves this response's
 * body alone (a compressor declining an image, say), so its
 * on_response_body is not called for it. When every body filter skips a
 * response, the body goes to the protocol as if none were registered:
 * without copies, and a file with sendfile. KEEL_ERR_STATE outside
 * on_response_head. Worker thread of the request. */
KEEL_FN(int, response_filter_skip_body, (keel_response *res), (res))

/* What a head filter needs to know of the body to come (ABI 1.4): its
 * length in bytes when known (a body given whole: keel_response_send,
 * _send_copy, _send_file; or a Content-Length the handler set), -1 when
 * it will be streamed (keel_response_write) without a declared length.
 * From on_response_head (or a handler). Worker thread of the request. */
KEEL_FN(int64_t, response_body_length, (keel_response *res), (res))

/* 1 if the body comes from keel_response_send_file, or (ABI 1.8) from
 * keel_response_send_pieces with a file range among them (a compressor
 * may leave files to precompressed siblings and sendfile), else 0. From
 * on_response_head. Worker thread of the request. */
KEEL_FN(int, response_body_from_file, (keel_response *res), (res))

/* The response's header fields, in order: how many, and the index-th as
 * views valid until the headers change (KEEL_ERR_NOTFOUND past the end).
 * For filters that must see every field of a name (Vary, Cache-Control),
 * which keel_response_header (the first) does not. Worker thread of the
 * request. */
KEEL_FN(size_t, response_header_count, (keel_response *res), (res))
KEEL_FN(int, response_header_at, (keel_response *res, size_t index, keel_header *out),
        (res, index, out))

/* Ends the exchange without completing its response (ABI 1.4): what was
 * sent stays, nothing more is, and the client must be able to tell. HTTP/1.1
 * closes the connection without the last chunk (or short of the
 * Content-Length); HTTP/2 resets the stream (RFC 9113 8.1). For a body that
 * fails halfway: a proxy whose upstream died, a file that could not be
 * read. Before the head, the protocol answers its own error (500). The
 * log phase runs with completed 0, and the request is gone after the
 * call. KEEL_ERR_STATE if the response already ended. Worker thread of the
 * request. */
KEEL_FN(int, response_abort, (keel_response *res), (res))

/* ---- The server, for reports (ABI 1.4) --------------------------------- */

/* The index-th loaded module (0-based, in load order): its name and
 * version ("" if it gave none), static strings valid until unload.
 * KEEL_ERR_NOTFOUND past the last one. Either pointer may be NULL. Any
 * thread, once load has returned. */
KEEL_FN(int, module_at,
        (keel_module *module, size_t index, const char **name, const char **version),
        (module, index, name, version))

/* The host's release version ("0.1.0") and ABI ("1.5"): what is running,
 * which may be newer than the headers a module was built with. Static
 * strings. Any thread. */
KEEL_FN(const char *, host_version, (void), ())
KEEL_FN(const char *, host_abi, (void), ())

/* ---- Idle connections (ABI 1.4) ------------------------------------------ */

/* Says whether the connection is idle between messages: closing it now
 * would lose nothing (an HTTP/1.1 connection waiting for its next request,
 * or for its first). When a new client arrives at max_connections, the
 * core closes the least recently idle such connection of the worker to
 * admit it, as nginx does with its reusable connections: at once, without
 * lingering, and only if no byte waits unconsumed and no output is queued
 * or owed. Its on_close gets KEEL_ERR_LIMIT; keel_connections_reclaimed_total
 * counts it. Protocols that keep state between messages a client would
 * miss (a WebSocket, a subscription) never mark themselves idle.
 *
 * The mark lasts until the protocol clears it (idle 0), the protocol is
 * handed bytes (on_data: a message may be starting, so mark it again when
 * the connection is idle again), the connection changes protocol, or it
 * closes. Marking an idle connection again keeps its place in the order.
 * An outbound connection (a kept-alive one in a pool) holds no
 * max_connections slot and is never closed for one; marked idle, it is
 * closed at once by keel_conn_close, without the FIN-then-lingering an
 * orderly close takes, when nothing waits unconsumed or queued and it
 * has no transport (a plain close, as nginx closes a cached upstream
 * connection). No effect on a closing connection. Worker thread of the
 * connection. */
KEEL_VFN(conn_set_idle, (keel_conn *conn, int idle), (conn, idle))
#endif /* KEEL__WANT(4) */

#if KEEL__WANT(5)

/* ---- HTTP: request trailers (ABI 1.5) -------------------------------------
 * A request's trailer section (RFC 9110 6.5): fields that come after the
 * body (an HTTP/1.1 chunked body's trailer section, RFC 9112 7.1.2; an
 * HTTP/2 request's trailing HEADERS, RFC 9113 8.1), a checksum or a status
 * the sender knew only at the end. They are kept apart from the head's
 * fields and never merged into them (RFC 9110 6.5.1).
 *
 * For handlers and filters: worker thread of the request. The trailers
 * are visible once the whole body has been read: from keel_request_read_body's
 * callback with KEEL_OK, or keel_request_stream_body's last call (last != 0),
 * and for the rest of the request's life. Before that, and for a body read
 * in neither way, or cut short (413, the client gone), there are none
 * (count 0, ptr NULL). Views live as long as the request. The core has
 * already dropped the fields RFC 9110 6.5.1 says cannot be trailers (see
 * keel_http_request_trailers), so what is here is never framing, routing,
 * authentication, a request modifier or a description of the content. */

/* The first trailer field called name (case-insensitive, as
 * keel_request_header); ptr NULL if absent or not visible yet. */
KEEL_FN(keel_str, request_trailer, (keel_request *req, const char *name), (req, name))

/* Trailer fields in the order received (0 while not visible). */
KEEL_FN(size_t, request_trailer_count, (keel_request *req), (req))

/* The index-th trailer field; KEEL_ERR_NOTFOUND past the end (or while
 * not visible). */
KEEL_FN(int, request_trailer_at, (keel_request *req, size_t index, keel_header *out),
        (req, index, out))

/* For protocol modules: the trailer fields that came after the request
 * body. Call it once, before the keel_http_request_body call with last set
 * (the handler sees them from that call on). The core copies the names
 * and values into the request's memory during the call, so the views may
 * point into buffers the protocol reuses. Limits (how many fields, how
 * many bytes) are the protocol's to enforce, as for the head: http1
 * counts a trailer section against max_header_bytes and max_headers
 * (431), h2 against its header-list limit; the core adds none.
 *
 * The core, not the protocol, drops the fields that cannot be trailers
 * (RFC 9110 6.5.1: their meaning is needed before the content, so a
 * handler must never act on them when they come after it), so that every
 * protocol behaves the same: message framing (Content-Length,
 * Transfer-Encoding, Trailer), routing (Host, and any name starting with
 * ':', HTTP/2 pseudo-fields), the connection (Connection, Keep-Alive,
 * Proxy-Connection, Upgrade, TE; RFC 9110 7.6.1), authentication
 * (Authorization, Proxy-Authorization, Cookie), request modifiers (Expect,
 * Max-Forwards, Range, If-Match, If-None-Match, If-Modified-Since,
 * If-Unmodified-Since, If-Range, Cache-Control, Pragma) and the content's
 * format (Content-Type, Content-Encoding, Content-Range). Any other field
 * is kept as sent. Empty names are dropped too.
 *
 * Returns KEEL_OK (nothing kept is not an error); KEEL_ERR_INVAL for
 * fields NULL with n > 0; KEEL_ERR_STATE if the body already ended (its
 * last piece was delivered, or it was cut short) or trailers were given
 * already; KEEL_ERR_CLOSED after keel_http_request_abort; KEEL_ERR_NOMEM
 * with nothing kept, and if the handler was reading the body the core has
 * answered 500 and its body callback got KEEL_ERR_NOMEM (as for a body
 * piece it cannot hold). The exchange may thus be over when this returns:
 * a protocol checks that it still holds the request (its sink's `done`
 * not called) before the last keel_http_request_body. Worker thread of
 * the request. */
KEEL_FN(int, http_request_trailers, (keel_request *req, const keel_header *fields, size_t n),
        (req, fields, n))
#endif /* KEEL__WANT(5) */

#if KEEL__WANT(6)

/* ---- Exchanges a client abandons (ABI 1.6) --------------------------------
 * A handler that answers later (after an upstream connects, a timer fires,
 * a file is read) holds its request across the wait. The client may leave
 * meanwhile: its connection closes or resets, an HTTP/2 stream is reset,
 * the server stops. The core then finishes the exchange without the
 * protocol (the log phase runs at once, as not completed), copies the
 * request's head into the request's own memory, so that its views (method,
 * target, path, fields, route parameters) stay readable, and keeps the
 * request and its response until the handler has learned it, exactly once,
 * by the first of:
 *   - a keel_response_* call that returns KEEL_ERR_CLOSED;
 *   - a body callback (keel_request_read_body) or an offload's done with
 *     KEEL_ERR_CLOSED;
 *   - the abort callback below.
 * After that call or callback returns the request and its response are
 * gone. keel_request_conn returns NULL from the abort on: the connection
 * may already be freed; whatever the handler needs of it later (the peer's
 * address, the scheme) it copies while the exchange is alive. A body being
 * streamed (keel_request_stream_body) is not told by its chunk callback,
 * which has no status: a handler that streams a body and answers only at
 * its end must register an abort callback, or it never learns. */

/* Asks for cb(req, userdata) (keel_request_abort_fn, keel/http.h) should the exchange be abandoned before its
 * response ends; NULL cancels. One registration per request: a second call
 * replaces the first. If the client has already gone and the handler has
 * not been told yet, cb is queued at once (and still runs after this call
 * returns). Costs nothing unless the exchange is abandoned. KEEL_OK, or
 * KEEL_ERR_STATE once the response has ended. Worker thread of the
 * request. */
KEEL_FN(int, request_on_abort, (keel_request *req, keel_request_abort_fn cb, void *userdata),
        (req, cb, userdata))

/* The worker the request runs on: its timers, posts, per-worker state.
 * Valid for the request's whole life, also after its client left (when
 * keel_request_conn is NULL). Worker thread of the request. */
KEEL_FN(keel_worker *, request_worker, (keel_request *req), (req))

/* ---- Deadlines (ABI 1.6) --------------------------------------------------
 * keel_conn_set_timeout's timeout is inactivity: every byte read or written
 * renews it, so a peer that trickles one byte at a time holds the
 * connection as long as it likes. A deadline is the time by which the
 * peer must have finished something (a TLS handshake, a request head, an
 * HTTP/2 header block) and no byte moves it (nginx's client_header_timeout,
 * Apache's mod_reqtimeout).
 *
 * Sets the connection's deadline ms from now, replacing one set before; 0
 * clears it. While it is set the inactivity and write timeouts wait and
 * the deadline alone counts; when it passes, the protocol's on_timeout runs
 * (a connection whose protocol is not open yet, during a transport's
 * handshake, or a protocol without on_timeout, is closed), and the deadline
 * is cleared. Clearing (or the deadline passing) starts the inactivity
 * timeout again from now.
 *
 * A connection with a deadline set holds a max_connections slot for a peer
 * that has not delivered anything yet: when a new client arrives at
 * max_connections and the worker has no idle connection to close
 * (keel_conn_set_idle), it closes the one whose deadline was set first,
 * at once, counted in keel_connections_reclaimed_total, and its on_close
 * gets KEEL_ERR_LIMIT. An outbound connection is never reclaimed (it holds
 * no slot). Worker thread of the connection. */
KEEL_VFN(conn_set_deadline, (keel_conn *conn, uint64_t ms), (conn, ms))

/* For a connection keel opened with keel_conn_connect: the most one read
 * of it may take from now on (keel_connect_options.read_buffer_size, 0:
 * the server's read_buffer_size; capped at read_buffer_max). A proxy
 * relaying to a client that takes bytes slowly, or shares one client
 * connection among many upstreams (HTTP/2), lowers it so that what it
 * reads and must hold stays small; larger reads save system calls when
 * the client keeps up. A pause of an outbound connection (keel_conn_pause)
 * takes effect at once: no read is let through after it. KEEL_ERR_STATE
 * for an accepted connection (its listener's size applies). Worker thread
 * of the connection. */
KEEL_FN(int, conn_set_read_size, (keel_conn *conn, size_t bytes), (conn, bytes))

/* The request body's length as the protocol framed it: the bytes a
 * Content-Length (or HTTP/2 content-length) declares, 0 for a request
 * without a body, -1 for a body of unknown length (HTTP/1.1 chunked; an
 * HTTP/2 request whose HEADERS did not end the stream and declared no
 * length). What a gateway needs to forward the body framed as it must
 * be (RFC 9112 6.3), before reading any of it. Worker thread of the
 * request. */
KEEL_FN(int64_t, request_body_length, (keel_request *req), (req))

/* ---- HTTP: request syntax (ABI 1.6) ----------------------------------------
 * 1 if s[0..len) is valid as `syntax` (KEEL_HTTP_TOKEN, _FIELD_VALUE,
 * _SCHEME, _AUTHORITY, _TARGET, _ORIGIN_FORM: keel/http.h), else 0 (an
 * unknown syntax, or s NULL with len > 0, is 0). The grammars every
 * protocol module checks a request against before it reaches the core,
 * so that a request means the same whichever protocol brought it and
 * whatever protocol a gateway passes it on in (http1, h2 and the proxy
 * all ask here). Any thread; allocates nothing. */
KEEL_FN(int, http_valid, (int syntax, const char *s, size_t len), (syntax, s, len))

/* ---- HTTP: request body back-pressure (ABI 1.6) ----------------------------
 * A handler that streams a request body (keel_request_stream_body) to a
 * consumer slower than the client (a proxy's upstream, a file, a queue)
 * stops and restarts the flow of ITS body, and of nothing else. HTTP/2
 * holds the stream back by its flow-control window alone (RFC 9113 5.2:
 * no WINDOW_UPDATE for bytes the handler has not taken), while the
 * connection's other streams, its PINGs and SETTINGS go on; HTTP/1.1 stops
 * reading the connection, which carries only this exchange. (Pausing
 * keel_request_conn() instead stalls every stream of an HTTP/2
 * connection, and its one flag is undone by any exchange's resume.)
 *
 * paused != 0, typically from inside the chunk callback: no further
 * chunk callback for this body, its last one included, until it is
 * resumed. What the client sends meanwhile is held by the protocol,
 * bounded by what it lets the client send: the stream's window ([h2]
 * initial_window; the connection's window too only past [h2]
 * body_buffer), the connection's read buffer for HTTP/1.1. The time the
 * handler holds the body is not the client's: http1's body_timeout and
 * body_min_rate, h2's stream_timeout and body_min_rate do not count it
 * (the handler's own deadline, a proxy's send_timeout, does).
 * paused == 0: resumes; what was held is delivered from the worker's loop,
 * never from inside this call (as keel_conn_resume); a pause made before
 * that keeps the body paused. A pause is a state, not a count: pausing
 * twice is one pause. It ends by itself when the body ends (read whole,
 * or cut short) or the exchange does (the response ended, the client
 * left): nothing is owed then. Nothing is allocated.
 *
 * With a protocol built before ABI 1.6 (its sink has no body_pause) the
 * core pauses the connection instead, but counted per exchange: it reads
 * again only once every exchange that paused it has resumed (or ended),
 * and the protocol's own keel_conn_pause / keel_conn_resume neither undo
 * nor are undone by these. Pieces such a protocol had already read may
 * still come after the pause.
 *
 * Returns KEEL_OK (also for resuming a body that is not paused);
 * KEEL_ERR_STATE for a pause when the body is not being streamed
 * (keel_request_stream_body not called, a request without a body, its
 * last piece already come, which is too late from inside that last call
 * too) or the exchange has ended; KEEL_ERR_CLOSED once the client left;
 * KEEL_ERR_LIMIT when 4095 exchanges already pause one connection on the
 * fallback; or the protocol's refusal. Worker thread of the request. */
KEEL_FN(int, request_body_pause, (keel_request *req, int paused), (req, paused))
#endif /* KEEL__WANT(6) */

#if KEEL__WANT(7)

/* ---- Declared configuration (ABI 1.7) --------------------------------------
 * keel/config.h and docs/configuration.md. */

/* The module's config struct, filled by the core from its [name] section
 * and the defaults of the table its descriptor's `config` points to, before
 * load runs. Read-only; the core owns it and its strings until the module
 * is unloaded. NULL for a module without a table. Any thread, from load
 * until unload. */
KEEL_FN(const void *, module_config, (keel_module *module), (module))

/* The module's config struct for this request's scope: its listener's,
 * site's (by Host or :authority) and path prefix's keys merged over the
 * module's section (docs/configuration.md, "Scopes"). The same as
 * keel_module_config() when the config has no scope, or before the request
 * was dispatched (a protocol's own calls). Never allocates; read-only,
 * valid until the module is unloaded. NULL for a module without a table.
 * Worker thread of the request. */
KEEL_FN(const void *, request_config, (keel_request *req, keel_module *module), (req, module))

/* ---- HTTP: what a request knows of its connection (ABI 1.7) ---------------
 * The facts a handler used to reach for with keel_request_conn, asked of
 * the request: they mean the same over HTTP/1.1 and HTTP/2 (where many
 * requests share one connection), and they stay true after the client has
 * left (the core copies them while the exchange is alive, so a handler
 * that answers late, or learns of the abort, can still log or forward
 * them). Worker thread of the request; valid from the first filter until
 * the request is released (after the abort too). Nothing is allocated. */

/* The client's address as keel_conn_peer_name writes it, "192.0.2.1:5678"
 * or "[2001:db8::1]:5678", NUL-terminated: behind a balancer speaking the
 * PROXY protocol (proxy_protocol=on), the client's address from its
 * header, not the balancer's. KEEL_OK; KEEL_ERR_INVAL if buf is NULL or
 * it does not fit in size (64 bytes always do; buf then holds "");
 * KEEL_ERR_CLOSED if the socket closed before the address was ever read
 * (a connection that broke while the handler was still running, before
 * its first return). */
KEEL_FN(int, request_peer_name, (keel_request *req, char *buf, size_t size), (req, buf, size))

/* The same address without the port or brackets: "192.0.2.1",
 * "2001:db8::1" (an IPv4 client of a dual-stack listener shows as
 * "::ffff:192.0.2.1", as the socket reports it): what an access log, an
 * X-Forwarded-For field or an allow list (keel/util.h keel_ip_parse)
 * wants. Returns as keel_request_peer_name. */
KEEL_FN(int, request_peer_ip, (keel_request *req, char *buf, size_t size), (req, buf, size))

/* "https" if the request came through the tls transport, else "http":
 * the scheme of the request's target URI as this server received it (RFC
 * 9110 4.2), for building absolute URIs, redirects and X-Forwarded-Proto.
 * Static strings. */
KEEL_FN(const char *, request_scheme, (keel_request *req), (req))

/* The name of the connection's transport ("tls"), NULL for plain TCP, as
 * keel_conn_transport_name. Valid until the transport's module unloads. */
KEEL_FN(const char *, request_transport_name, (keel_request *req), (req))

/* The id of the connection the request came on (keel_conn_id): unique
 * within the process, the same for every request of one connection (the
 * streams of an HTTP/2 connection, the keep-alive requests of HTTP/1.1).
 * For grouping and logging; never 0. */
KEEL_FN(uint64_t, request_conn_id, (keel_request *req), (req))
#endif /* KEEL__WANT(7) */

#if KEEL__WANT(8)

/* ---- HTTP: the client's address as bytes (ABI 1.8) --------------------------
 * For what matches the client on every request (docs/web.md, "Access by
 * address"): keel_request_peer_ip formats text that a matcher would parse
 * again, some 1,500 instructions a request. */

/* The address keel_request_peer_ip names (the PROXY protocol's client
 * where the listener speaks it), as 16 bytes in network order, an IPv4
 * address IPv4-mapped (::ffff:a.b.c.d): the layout of keel/util.h's
 * keel_ip, so keel_cidr_match takes it as it is. KEEL_OK;
 * KEEL_ERR_INVAL if out is NULL; KEEL_ERR_NOTFOUND when the peer has no IP
 * address (a Unix socket); KEEL_ERR_CLOSED as keel_request_peer_name.
 * Nothing is allocated; worker thread of the request, from the first
 * filter until the request is released. */
KEEL_FN(int, request_peer_ip_bytes, (keel_request *req, unsigned char *out),
        (req, out))

/* ---- HTTP: error pages and internal redirects (ABI 1.8) --------------------
 * nginx's error_page and internal redirect: docs/web.md, "Error pages". */

/* Makes fn the error-page handler: the core calls it, on the request's
 * worker, before it answers a status of 400 or more with its short text
 * (the router's 404 (not 405, whose Allow field only that answer knows),
 * 413 over the body limit, 500 for a handler or filter error,
 * keel_response_send_status from any handler), while no
 * head has gone, the client is there and no request body is being
 * streamed. It is called at most once per request: an error while the
 * error page is being answered gets the short text of the first status.
 * One module per server: KEEL_ERR_EXISTS if another has set one;
 * KEEL_ERR_INVAL for a NULL fn; KEEL_ERR_STATE outside load. Main thread,
 * during load. */
KEEL_FN(int, http_error_handler_set, (keel_module *module, keel_http_error_fn fn, void *userdata),
        (module, fn, userdata))

/* Answers res with what the route for `path` answers, as if the request
 * had asked for it (nginx's internal redirect): the fields set on res are
 * dropped, the request's path and query become path's ("/p?q"), its
 * method GET (HEAD stays HEAD), its conditional and Range fields are
 * hidden (a page stands in for the resource: RFC 9110 13.2.1 applies to
 * the resource asked for, not the page), its path scope is chosen again,
 * and the router and the handler run now, inside this call; the request
 * filters do not run again. With status nonzero (200..599), a 2xx the
 * handler answers goes out with that status instead (an error page keeps
 * the error's status). The caller gives the response up: it must not
 * touch res afterwards, and its abort callback is dropped. path is copied.
 * KEEL_OK; KEEL_ERR_INVAL for a path that keel_request_set_path would
 * refuse (not rooted, a NUL, climbing above "/"; dot segments are
 * resolved as in a client's path), a query with control bytes, or a bad
 * status; KEEL_ERR_STATE once the
 * head has gone or the response ended; KEEL_ERR_LIMIT after 8 internal
 * redirects of one request; KEEL_ERR_CLOSED once the client left.
 * Worker thread of the request. */
KEEL_FN(int, response_redirect_internal, (keel_response *res, const char *path, int status),
        (res, path, status))

/* ---- HTTP: rewriting a request's path (ABI 1.8) ----------------------------
 * For a request filter that maps one path onto another before routing
 * (the rewrite module: nginx's `rewrite`, Caddy's `rewrite`). */

/* Replaces the request's decoded path (keel_request_path) with
 * path[0..path_len): what the next filters, the router and the handler
 * see. path is decoded text, as keel_request_path gives it ('%' is a
 * literal byte); it is checked as the core checks a client's decoded path:
 * it must start with "/", hold no NUL byte, and its "." and ".." segments
 * are removed (RFC 3986 5.2.4) without climbing above "/". With
 * KEEL_PATH_QUERY in flags, the query (keel_request_query, the raw text
 * after "?") becomes query[0..query_len), each byte one a request-target
 * may hold (keel_http_valid's KEEL_HTTP_TARGET), or none if query is NULL;
 * without it the query stays. With KEEL_PATH_RESCOPE, the request's path
 * scope is chosen again for the new path within the same listener and
 * site (docs/configuration.md, "Choosing a path scope"), so
 * keel_request_config answers for it from then on; without it the scope
 * stays (nginx's `rewrite ... break`). keel_request_target, the request's
 * head as received, never changes.
 *
 * The core copies both into the request (the caller's buffers may go once
 * this returns); earlier views of the path or query stay valid until the
 * request is released. Only from a request filter's on_request, before
 * the router ran (KEEL_ERR_STATE after it, or once a response began).
 * KEEL_OK; KEEL_ERR_INVAL for a path or query that is not right (nothing
 * changed); KEEL_ERR_NOMEM. Worker thread of the request. */
KEEL_FN(int, request_set_path,
        (keel_request *req, const char *path, size_t path_len, const char *query,
         size_t query_len, unsigned flags),
        (req, path, path_len, query, query_len, flags))

/* The server's end of the request's connection as the socket reports it,
 * "127.0.0.1:8080" or "[::1]:8443" (NUL-terminated): the address and port
 * the client reached, for nginx's $server_addr and $server_port (with
 * port 0 on the listen line, the port the kernel chose). KEEL_OK;
 * KEEL_ERR_INVAL if buf is NULL or it does not fit in size (64 bytes
 * always do; buf then holds ""); KEEL_ERR_UNSUPPORTED for a connection
 * that is not TCP; KEEL_ERR_CLOSED if the socket has closed, or the
 * exchange was left to answer later (the core does not keep this one:
 * ask before going asynchronous). Asks the kernel each time. Worker
 * thread of the request. */
KEEL_FN(int, request_local_name, (keel_request *req, char *buf, size_t size), (req, buf, size))

/* ---- Declared configuration: the scopes' values (ABI 1.8) -----------------
 * What a module checks or prepares beyond its table (a regular expression
 * compiled, a variable name known) for every scope, not only its own
 * section: the scopes are built after every module's load, so load asks
 * for them to be shown. */

/* From load: once every module has loaded and the scopes are built (before
 * serving, and under `keel -t`), the core calls fn(module, conf, userdata)
 * on the main thread with each scope's merged struct of the module
 * (keel_request_config's answers: every listener's, site's and path
 * prefix's), in no defined order. A struct may come more than once, and
 * scopes that inherit a key share its strings (the same pointers), so a
 * module that prepares something per value can key it on them. The
 * structs live until the module is unloaded. fn returning an error fails
 * the start (keel -t exits 1); report the value first with
 * keel_config_value_error. fn may register routes and filters as load
 * does (the core prepares the router after the calls). No call when the
 * config has no scope section:
 * the module's own struct (keel_module_config) is then the only one.
 * KEEL_OK; KEEL_ERR_INVAL for a NULL fn or a module without a table;
 * KEEL_ERR_STATE outside load. The last call wins. */
KEEL_FN(int, module_config_scopes, (keel_module *module, keel_config_scope_fn fn, void *userdata),
        (module, fn, userdata))

/* Reports a bad value by the string a struct of the module holds (a
 * string key's field or a list item, from its own section or any scope):
 * logs "FILE:LINE: [section] key: message" with the line that wrote it
 * ("[site a.test] rewrite.return" in a scope), or "[module] message" if
 * the text is not one of the config's values. Returns KEEL_ERR_CONFIG.
 * Main thread, from load or a keel_module_config_scopes call. */
KEEL_FN(int, config_value_error, (keel_module *module, const char *value, const char *message),
        (module, value, message))

/* ---- HTTP: request filters that wait (ABI 1.8) ----------------------------
 * A request filter (keel_http_filter.on_request) may hold a request while
 * it waits for something (a password hash checked on the thread pool, a
 * rate limiter's delay) by returning KEEL_HTTP_DONE without answering;
 * the core then runs neither the later filters nor the router. When the
 * wait is over the filter either answers (keel_response_*) or calls
 * keel_request_continue, which runs the filters after it, then the router
 * and the handler, as if it had returned KEEL_HTTP_NEXT. A filter that
 * holds a request on anything but keel_offload registers an abort
 * callback (keel_request_on_abort) to stop waiting when the client goes;
 * if the client goes while the wait is ending (the abort is queued when
 * the timer fires), keel_request_continue tells it instead: cancel the
 * abort callback first (keel_request_on_abort(req, NULL, NULL)). */

/* Resumes a request held by a request filter: the next filters, the router
 * and the handler run inside this call. KEEL_OK; KEEL_ERR_CLOSED if the
 * client went away (the request is being released: only free your data);
 * KEEL_ERR_STATE if no filter holds the request (it was already
 * continued, was answered, or the filter that returned KEEL_HTTP_DONE
 * had answered). Worker thread of the request; never from inside the
 * on_request call that holds it (return KEEL_HTTP_NEXT there). */
KEEL_FN(int, request_continue, (keel_request *req), (req))

/* ---- Output in pieces (ABI 1.8) ---------------------------------------------
 * keel_piece (keel/types.h): bytes or a file range, sent in one ordered
 * queue per connection. */

/* Writes the pieces in order, after everything written before this call
 * and before anything written after it, with one callback for the whole.
 * Runs of bytes leave as keel_conn_write's do (one writev); file ranges
 * as keel_conn_write_file's (sendfile on plain TCP; read in 64 KiB pieces
 * on the thread pool through a transport or where there is no sendfile),
 * a run of bytes just before a range marked as followed by more, as
 * keel_conn_write_file_after does. Pieces of length 0 send nothing.
 *
 * The array is read during the call only; the bytes and descriptors its
 * pieces name are borrowed until cb (see keel_piece). Everything not yet
 * sent counts in keel_conn_write_queued and against write_high_water, and
 * write_timeout applies while it waits.
 *
 * cb (may be NULL) is called exactly once if this returns KEEL_OK, on the
 * worker thread and never from inside this call: KEEL_OK once the last
 * byte has left (through a transport: once it was handed over and the
 * queue is down to 64 KiB, as keel_conn_write); KEEL_ERR_IO if a file was
 * shorter than its range, a read failed or the socket did (the connection
 * is then aborted: the byte stream cannot be repaired); KEEL_ERR_CLOSED if
 * the connection closed first.
 *
 * Returns KEEL_ERR_CLOSED if the connection is closing; KEEL_ERR_INVAL for
 * a NULL array with npieces > 0, an unknown kind, a BYTES piece over
 * KEEL_BUF_MAX or with a NULL base and a length, a FILE piece with a
 * negative fd or a range beyond 2^63; KEEL_ERR_NOMEM. cb is then never
 * called and nothing was queued. Worker thread of the connection. */
KEEL_FN(int, conn_write_pieces,
        (keel_conn *conn, const keel_piece *pieces, size_t npieces, keel_write_cb cb,
         void *userdata),
        (conn, pieces, npieces, cb, userdata))

/* Sends the pieces as the whole body of the response and ends it: the
 * length (Content-Length) is the sum of theirs; a multipart/byteranges
 * body, say, as part heads and file ranges in one call. The head is sent
 * first (the status and headers set so far; the filters run as for any
 * response). Where the protocol can send a file range itself (HTTP/1.1
 * with a length-framed body, no body filter), the ranges go as
 * keel_conn_write_pieces sends them (sendfile on plain TCP); otherwise the
 * core reads them in 64 KiB pieces on the thread pool, each after the
 * previous one has been taken, as keel_response_send_file does. For HEAD
 * the head alone goes and no file is read.
 *
 * The array is read during the call only; the bytes and descriptors are
 * borrowed (the core never closes them) until release(NULL, userdata),
 * which is called exactly once, whatever this returns: once everything
 * has left or can never (the client left, a file was short: the
 * connection is then closed, as the promised length was not kept). It
 * may run inside this call (a refusal, HEAD, an empty body) and runs
 * before or with the response's end, so the request must not be touched
 * from it. release may be NULL.
 *
 * Returns KEEL_OK; KEEL_ERR_INVAL for pieces keel_conn_write_pieces would
 * refuse (nothing is sent; the response is still the handler's);
 * KEEL_ERR_STATE if a body was already begun or sent; KEEL_ERR_CLOSED once
 * the client left; KEEL_ERR_NOMEM. Any status but KEEL_ERR_INVAL and
 * KEEL_ERR_STATE ends the response. Worker thread of the request. */
KEEL_FN(int, response_send_pieces,
        (keel_response *res, const keel_piece *pieces, size_t npieces, keel_free_fn release,
         void *userdata),
        (res, pieces, npieces, release, userdata))

/* ---- Tunnels: a connection carried inside another (ABI 1.8) ---------------
 * A byte stream that is not a socket of its own (an HTTP/2 stream opened
 * by RFC 8441's extended CONNECT) presented to a protocol as a keel_conn,
 * so that a protocol written for a socket (websocket) runs over it
 * unchanged. The carrier (the module that owns the stream: h2) supplies
 * the transport: the protocol's writes reach its on_write, which keeps
 * them (copied) until it can send them and reports their departure with
 * keel_tunnel_sent (they count as the connection's queued output until
 * then: the transport's `queued`); its peer's bytes go in with
 * keel_transport_deliver (delivered to the protocol from the loop), its
 * end with keel_tunnel_eof; reading on or off reaches the transport's
 * on_read_wanted, for the carrier's flow control. The protocol's orderly
 * close reaches the transport as on_shutdown (the carrier ends the
 * stream once what it holds has gone) then on_close; an abort
 * (keel_conn_abort, a timeout) as on_close alone. keel_conn_abort on the
 * tunnel is how the carrier tells the protocol that the stream is gone,
 * and it aborts every tunnel it carries before its own connection's
 * on_close returns. A tunnel takes no max_connections slot (its carrier
 * holds one), has no socket (keel_conn_peer_name gives the carrier's peer;
 * keel_transport_send is KEEL_ERR_UNSUPPORTED), and keel_conn_each
 * (shutdown) reaches it like any connection. Worker thread of the
 * carrier. */

/* Opens a tunnel on carrier's worker: a connection whose transport is
 * `transport` (its table copied; on_write required, on_open, on_shutdown,
 * on_close, queued and on_read_wanted as above; on_read unused) with
 * transport_data set before the transport's on_open, which must not
 * defer the protocol, running `protocol` (its on_open(conn, arg)).
 * KEEL_OK with *out the connection once the protocol is open (even if it
 * closed at once: the transport hears it); the connection is the
 * carrier's to feed until the transport's on_close. Refused before
 * anything ran, arg still the caller's and *out NULL: KEEL_ERR_INVAL (a
 * NULL argument, no on_write), KEEL_ERR_NOTFOUND (no such protocol),
 * KEEL_ERR_NOMEM, KEEL_ERR_SHUTDOWN (the worker is stopping),
 * KEEL_ERR_CLOSED (the carrier is closing). Otherwise a negative status
 * is the transport's or the protocol's on_open refusing: the connection
 * is aborted, the transport's on_close follows from the loop if its
 * on_open succeeded, and arg was the protocol's (*out NULL); a carrier
 * tells this from the refusals above by its transport's on_open having
 * run. */
KEEL_FN(int, conn_open_tunnel,
        (keel_conn * carrier, const keel_transport *transport, void *transport_data,
         const char *protocol, void *arg, keel_conn **out),
        (carrier, transport, transport_data, protocol, arg, out))

/* The tunnel's transport sent bytes it held (its `queued` count fell):
 * write completions held for pacing are owed (they run from the loop),
 * the protocol's on_drain runs inside this call when the queue is below
 * a quarter of write_high_water after having been over it (and may write:
 * on_write), and an orderly close waiting for the output goes on. Nothing
 * on a connection that is not a tunnel, or whose close has come. */
KEEL_VFN(tunnel_sent, (keel_conn * conn), (conn))

/* The tunnel's peer ended its side (HTTP/2 END_STREAM): the protocol's
 * on_eof (or, without one, the close once it is not paused), after the
 * bytes delivered before it, as for a socket's EOF; it may run inside
 * this call. Nothing on a connection that is not a tunnel, or is
 * closing. */
KEEL_VFN(tunnel_eof, (keel_conn * conn), (conn))
/* ---- HTTP: log fields (ABI 1.8) --------------------------------------------
 * Named values a module attaches to a request for whoever logs it: the
 * proxy's upstream address, status and time (nginx's $upstream_addr,
 * $upstream_status, $upstream_response_time), an application's user or
 * tenant. The accesslog module writes them ($field_NAME in a template,
 * and every one in format = json); a log filter of another module reads
 * them in on_log. Worker thread of the request. */

/* Sets the field `name` of req to value[0..len): copied into the request
 * (the caller's bytes may go once this returns), replacing the value an
 * earlier call gave the same name; fields keep the order of their first
 * setting. name is 1..32 bytes of a-z, 0-9 and '_'; the value any bytes
 * up to 4,096 (loggers escape what they write). KEEL_OK;
 * KEEL_ERR_INVAL for a NULL or bad name, a NULL value with len > 0, or a
 * value too long; KEEL_ERR_STATE once the log phase ran; KEEL_ERR_NOMEM.
 * From a filter or a handler, until the response's end. */
KEEL_FN(int, request_set_log_field, (keel_request *req, const char *name, const char *value,
        size_t len), (req, name, value, len))

/* The value of the field `name`, or {NULL, 0} if none was set. The view
 * lives as long as the request (until its log phase has run). */
KEEL_FN(keel_str, request_log_field, (keel_request *req, const char *name), (req, name))

/* The index-th field set on req (0-based, in the order of their first
 * setting): KEEL_OK with *out its name and value (views as above);
 * KEEL_ERR_NOTFOUND past the last. */
KEEL_FN(int, request_log_field_at, (keel_request *req, size_t index, keel_header *out),
        (req, index, out))

/* ---- HTTP: prepared response fields (ABI 1.8) --------------------------------
 * A field a module adds to many responses (the headers module's `add`,
 * CORS's Vary) is checked, classified (keel/header_tokens.h) and copied
 * once, at load, rather than on every response: keel_response_header_add
 * checks the name and value, copies both into the request, and the core
 * classifies the name again to find framing fields, some 390 instructions
 * a field (docs/performance.md). */

/* Checks name[0..name_len) (a token, RFC 9110 5.1) and value[0..value_len)
 * (no control character but HTAB, RFC 9110 5.5; it may be empty) and
 * keeps a copy of both with the name's token. The fields that frame the
 * message or belong to the connection (Content-Length, Transfer-Encoding,
 * Connection, Keep-Alive, Proxy-Connection, TE, Upgrade, Trailer,
 * HTTP2-Settings, and the Date the protocol writes) are refused: a fixed
 * value there would be wrong or dropped. The name is sent as written.
 * KEEL_OK with *out the field; it belongs to the core,
 * lives until the module is unloaded (after the last request), and may be
 * used from any worker. KEEL_ERR_INVAL for a NULL argument or a name or
 * value that may not be sent (*out NULL: report the config value with
 * keel_config_value_error, which gives the file and line); KEEL_ERR_NOMEM;
 * KEEL_ERR_STATE outside load (load or a keel_module_config_scopes
 * call). Main thread. */
KEEL_FN(int, field_prepare,
        (keel_module * module, const char *name, size_t name_len, const char *value,
         size_t value_len, const keel_prepared_field **out),
        (module, name, name_len, value, value_len, out))

/* Adds field to res's header section as keel_response_header_add would,
 * without checking or copying it again; with `replace` nonzero, every
 * field of the same name (any case) goes first, as keel_response_header_set.
 * KEEL_OK; KEEL_ERR_INVAL for a NULL field; KEEL_ERR_STATE once the head
 * was sent; KEEL_ERR_NOMEM. Worker thread of the request. */
KEEL_FN(int, response_field_add,
        (keel_response * res, const keel_prepared_field *field, int replace),
        (res, field, replace))

/* ---- Why an outbound connection failed, in words (ABI 1.8) ----------------
 * Inside a keel_connect_options on_error, what the status stands for on
 * this attempt: the resolver's reason ("resolving db.internal: unknown
 * node or service (EAI_NONAME)", "... temporary failure (EAI_AGAIN)": a
 * name server that did not answer in time, not a name that does not
 * exist), the last address's error ("connecting to 10.0.0.5:6379:
 * connection refused (ECONNREFUSED)"), the deadline, the graceful stop or
 * the transport's refusal. For a module's own log line or its health
 * page; the status stays what to act on. Never NULL: "" outside on_error
 * and when there is nothing to add (out of memory). The string is the
 * core's and valid until on_error returns: copy it to keep it. Worker
 * thread of the on_error. */
KEEL_FN(const char *, connect_error_detail, (keel_worker * worker), (worker))

/* The most body bytes the request's protocol takes for it: its max_body
 * ([http1] max_body, [h2] max_body), the cap on
 * keel_request_read_body's max and on a streamed body. 0: the protocol
 * sets no limit, or was built before ABI 1.8 (it still enforces its own).
 * A handler that needs more tells the operator to raise max_body rather
 * than passing a larger max. Nothing can fail. Worker thread of the
 * request, from the first filter until it is released. */
KEEL_FN(uint64_t, request_body_limit, (keel_request * req), (req))

/* ---- Sites by name outside a request (ABI 1.8) ------------------------------
 * For what is chosen per site before a request exists: the certificate a
 * TLS handshake serves for the name its client asked for (SNI, RFC 6066
 * 3), nginx's server block chosen by server_name for ssl_certificate. */

/* The module's config struct for the site that conn's listener serves for
 * host[0..host_len) (a name as SNI carries it, or a Host value: a port and
 * a trailing dot are ignored), chosen as a request's site is: the exact
 * name, then the longest wildcard, then the default site
 * (docs/configuration.md, "Scopes"); the site's own struct, merged over its
 * listener's and the global one, never a path prefix's. NULL when no site
 * takes the name and [keel] unknown_host answers a status instead. The
 * module's global struct (keel_module_config) when the config has no scope
 * section or conn was not accepted on a listener (an outbound connection,
 * a tunnel). The struct lives until the module is unloaded; nothing is
 * allocated. NULL for a NULL conn or module. Worker thread of the
 * connection, from its transport's or protocol's callbacks. */
KEEL_FN(const void *, conn_site_config,
        (keel_conn *conn, keel_module *module, const char *host, size_t host_len),
        (conn, module, host, host_len))

/* Resolves `path`, a file name the module read from `value` (a string a
 * struct of the module holds: a string key's field or a list item, from
 * its own section or any scope), as keel_config_path does for its own
 * section: relative to the folder of the config file holding the line
 * that wrote value, unchanged if absolute or if the line came from --set
 * or a config held in memory. Writes the result to buf (NUL-terminated).
 * KEEL_OK; KEEL_ERR_NOTFOUND if value is not one of the config's values
 * (path is then copied unchanged when it fits); KEEL_ERR_INVAL if buf is
 * NULL or too small; KEEL_ERR_NOMEM. Main thread, from load or a
 * keel_module_config_scopes call. */
KEEL_FN(int, config_value_path,
        (keel_module *module, const char *value, const char *path, char *buf, size_t size),
        (module, value, path, buf, size))

/* ---- HTTP: a protocol's own errors through the exchange (ABI 1.8) ----------
 * For the answers a protocol makes before a request exists (a malformed
 * or oversized head, a head that came too slowly: HTTP/1.1's 400, 408,
 * 414, 431, 413 on a declared length, 505; HTTP/2's 431 and 413), so that
 * the configured response fields (the headers module with `always`) and
 * error pages (the errors module) apply to them too, as nginx's
 * add_header ... always and error_page do. */

/* Answers req, which the protocol started (keel_http_request_start) for a
 * message it refuses, with status (400..599) instead of dispatching it:
 * no request filter, router or handler runs; the request's scope is its
 * listener's (the global sections merged with its [listener]; not a site:
 * a Host that came with a refused head is not to be trusted); the
 * error-page handler (keel_http_error_handler_set) and the response head
 * filters run as for any error the core answers, then the sink gets the
 * response as for any exchange, done included, inside this call or later
 * (a page read from a file). The head may be empty (no method, target or
 * field: what the protocol could not read); the request's path is then
 * "/", and keel_request_target stays empty (a request's never is: an
 * access log tells a refused head by it, though an error page's internal
 * redirect makes the method GET). Whether the connection stays is the protocol's (HTTP/1.1 closes
 * it: where the next message starts is unknown). Once per request, in
 * place of keel_http_request_dispatch. KEEL_OK; KEEL_ERR_INVAL for a NULL
 * req or a status outside 400..599 (nothing was sent: the request is
 * still the protocol's to dispatch or abort). Worker thread of the
 * request. */
KEEL_FN(int, http_request_refuse, (keel_request *req, int status), (req, status))
#endif /* KEEL__WANT(8) */

#if KEEL__WANT(9)
/* ABI 1.9: entries are appended below this line, each with its section
 * comment (what it is for, ownership, thread, errors). */

/* ---- HTTP: a file's bytes from memory (ABI 1.9) --------------------------- */

/* As keel_response_send, for the bytes of a file that the module keeps in
 * memory (static's content cache of small files): the same body, length
 * and release (free_fn(data, userdata) once the bytes are no longer
 * needed, at once on an error), but keel_response_body_from_file says 1,
 * so that filters treat the body as a file's (deflate's compress_files).
 * The caller sets the file's validators (ETag, Last-Modified) as for
 * keel_response_send_file. Same returns as keel_response_send. Worker
 * thread of the request. */
KEEL_FN(int, response_send_file_bytes,
        (keel_response *res, const void *data, size_t len, keel_free_fn free_fn, void *userdata),
        (res, data, len, free_fn, userdata))

/* ---- HTTP: body filters that pass pieces (ABI 1.9) ------------------------ */

/* For on_response_pieces filters (keel_http_filter, ABI 1.9): passes
 * pieces on to the next body filter, and finally to the protocol, in
 * order after what was passed before; last ends the body (once). Bytes
 * pieces need only live until the call returns (the core copies what it
 * keeps); a file range's descriptor must stay open until the response has
 * ended (the ranges the filter was given do; a filter that opens a file of
 * its own closes it in on_log). KEEL_OK; KEEL_ERR_INVAL for pieces
 * keel_conn_write_pieces would refuse; KEEL_ERR_UNSUPPORTED for a file
 * range when a later filter of this response needs the bytes (only
 * on_response_body) — a filter that passes on only the ranges it was given
 * never sees it; KEEL_ERR_CLOSED once the client left; KEEL_ERR_NOMEM.
 * Nothing is sent on an error. Worker thread of the request, from inside
 * the filter's on_response_pieces (or on_response_body) only. */
KEEL_FN(int, response_filter_emit_pieces,
        (keel_response *res, const keel_piece *pieces, size_t npieces, int last),
        (res, pieces, npieces, last))

/* ---- Datagram protocols (ABI 1.9) ------------------------------------------
 * keel/types.h says what a datagram protocol is, and docs/udp.md how to
 * write one: the listen line, per-worker sockets, batching, the send queue
 * and the core's keel_udp_* series. */

/* Registers a datagram protocol under protocol->name (its own namespace:
 * a connection protocol may have the same name). The struct is copied.
 * KEEL_OK; KEEL_ERR_INVAL (NULL, no on_datagram, a bad name or size),
 * KEEL_ERR_EXISTS, KEEL_ERR_STATE (not loading), KEEL_ERR_NOMEM. Main
 * thread, from load. */
KEEL_FN(int, dgram_protocol_register,
        (keel_module *module, const keel_dgram_protocol *protocol), (module, protocol))

/* Sends len bytes to peer from dgram's socket. The bytes are copied (or
 * sent before the call returns): the caller keeps its buffer. A datagram
 * the socket cannot take at once waits in the socket's send queue, in
 * order; when the queue holds the listener's send_queue bytes the datagram
 * is dropped, counted (keel_udp_dropped_total{reason="send_queue"}), and
 * KEEL_ERR_LIMIT returned: UDP promises no delivery, and a peer that does
 * not read must not make the worker hold memory without bound.
 * KEEL_OK (sent or queued); KEEL_ERR_LIMIT; KEEL_ERR_INVAL (NULL dgram or
 * peer, len over KEEL_DGRAM_MAX, or an IPv4 peer on an IPv6 socket and
 * the reverse); KEEL_ERR_CLOSED (from or after on_close); KEEL_ERR_IO
 * (the system refused it: counted as dropped, reason="error");
 * KEEL_ERR_NOMEM. Worker thread of dgram. */
KEEL_FN(int, dgram_send,
        (keel_dgram *dgram, const keel_dgram_peer *peer, const void *data, size_t len),
        (dgram, peer, data, len))

/* The protocol's per-socket pointer (NULL until set). Worker thread of
 * dgram. */
KEEL_VFN(dgram_set_data, (keel_dgram *dgram, void *data), (dgram, data))
KEEL_FN(void *, dgram_data, (keel_dgram *dgram), (dgram))

/* The worker whose thread serves dgram (for keel_worker_state and the
 * metric updates). Never NULL for a valid dgram. Worker thread of dgram. */
KEEL_FN(keel_worker *, dgram_worker, (keel_dgram *dgram), (dgram))

/* The module that registered dgram's protocol: how a callback reaches its
 * module's data. Worker thread of dgram. */
KEEL_FN(keel_module *, dgram_module, (keel_dgram *dgram), (dgram))

/* The value of the listen line's KEY=VALUE option, or NULL (a bare word
 * gives ""). Valid until the server is freed. Worker thread of dgram. */
KEEL_FN(const char *, dgram_listen_option, (keel_dgram *dgram, const char *key), (dgram, key))

/* ---- Metrics sources (ABI 1.9) ---------------------------------------------
 * Series a module cannot register at load because their names arrive at
 * run time (statsd): the module keeps their values and hands them to every
 * keel_metrics_collect through a source (keel/metrics.h,
 * keel_metrics_source_fn), so that /metrics serves them beside the
 * registered ones. */

/* Adds fn (with userdata) to the sources keel_metrics_collect calls, after
 * the registered families, in registration order. The module keeps
 * userdata alive until unload. KEEL_OK; KEEL_ERR_INVAL (NULL fn);
 * KEEL_ERR_STATE (not loading); KEEL_ERR_NOMEM. Main thread, from load. */
KEEL_FN(int, metrics_source_register,
        (keel_module *module, keel_metrics_source_fn fn, void *userdata), (module, fn, userdata))

/* ---- HTTP: the credentials of a client on a Unix socket (ABI 1.9) ---------
 * A request that came on a `listen = unix:PATH` listener has no client
 * address (keel_request_peer_name and _peer_ip write "unix:", as nginx's
 * $remote_addr; keel_request_peer_ip_bytes says KEEL_ERR_NOTFOUND), but
 * the kernel recorded who connected: for handlers that authorise local
 * callers by user (docs/http.md, "Clients on a Unix socket"). */

/* The user, group and process id of the process that connected, as the
 * kernel recorded them at connect(2) (Linux SO_PEERCRED; getpeereid(3)
 * on the BSDs and macOS, which give no pid: *pid is then -1). The values
 * are copied: the process may have changed user or exited since. Any of
 * uid, gid and pid may be NULL. KEEL_OK; KEEL_ERR_NOTFOUND when the
 * request did not come on a Unix socket (TCP: nothing is written);
 * KEEL_ERR_UNSUPPORTED when the system could not tell (Windows has no Unix
 * listeners); KEEL_ERR_CLOSED as keel_request_peer_name; KEEL_ERR_INVAL
 * for a NULL req. Nothing is allocated; worker thread of the request,
 * from the first filter until the request is released. */
KEEL_FN(int, request_peer_cred, (keel_request *req, uint32_t *uid, uint32_t *gid, int64_t *pid),
        (req, uid, gid, pid))
#endif /* KEEL__WANT(9) */

#if KEEL__WANT(10)
/* ABI 1.10: entries are appended below this line, each with its section
 * comment (what it is for, ownership, thread, errors). */

/* ---- HTTP: a request field by its token (ABI 1.10) -------------------------
 * keel_request_header classifies the name it is given (keel_header_token)
 * on every call; a filter that reads the same well-known field on every
 * request (auth_basic's Authorization) names it by its token instead,
 * which the core compares with the token each field got when the head
 * arrived: an integer compare a field. */

/* The value of the request's first field whose name is the well-known
 * name `token` (keel/header_tokens.h, KEEL_HDR_*: any ASCII case, as
 * keel_request_header answers for that name); ptr NULL if there is none,
 * for KEEL_HDR_UNKNOWN and for a token this host's list does not have
 * (ids 1 to 81 are every 1.10 host's; ask a newer one by name). The value
 * is a view of the head, as keel_request_header's. Worker thread of the
 * request. */
KEEL_FN(keel_str, request_header_token, (keel_request *req, unsigned token), (req, token))
#endif /* KEEL__WANT(10) */

#if KEEL__WANT(11)
/* ABI 1.11: entries are appended below this line, each with its section
 * comment (what it is for, ownership, thread, errors). Also in 1.11:
 * keel_field and keel_http_sink.send_head_fields (keel/http.h), through
 * which HTTP/1.1 copies a prepared field's line whole, and
 * keel_http_filter.scope, the per-scope filter pipeline. */

/* ---- HTTP: a scope's prepared fields in one call (ABI 1.11) ----------------
 * A module that adds several prepared fields to a response (the headers
 * module's `set` and `add` of a scope) adds them with one call instead of
 * one keel_response_field_add each: the list grows once, and the fields
 * are copied by value (name, value, field line, token). */

/* Adds fields[0..n) to res's header section in order, as n calls of
 * keel_response_field_add(res, fields[i], replace) would: with `replace`
 * nonzero each field first removes every field of its name (any case),
 * so of two prepared fields with one name the later stays. The fields
 * are the core's (keel_field_prepare) and the array is the caller's,
 * read during the call only; nothing is copied but the fields' views.
 * KEEL_OK (n 0 included); KEEL_ERR_INVAL for a NULL res, a NULL array
 * with n > 0 or a NULL entry; KEEL_ERR_STATE once the head was sent;
 * KEEL_ERR_NOMEM. On an error nothing was added or removed. Worker
 * thread of the request. */
KEEL_FN(int, response_fields_add,
        (keel_response * res, const keel_prepared_field *const *fields, size_t n, int replace),
        (res, fields, n, replace))
#endif /* KEEL__WANT(11) */

#if KEEL__WANT(12)
/* ABI 1.12: entries are appended below this line, each with its section
 * comment (what it is for, ownership, thread, errors). */

/* ---- HTTP: prepared fields made at run time (ABI 1.12) ---------------------
 * keel_field_prepare makes a field at load, for a value the config gives.
 * A value known only at run time that many responses then carry (a cached
 * file's ETag and Last-Modified, which change with the file) is made on
 * the worker once, kept with what it describes, added by pointer
 * (keel_response_field_add, keel_response_fields_add) and freed by the
 * module when what it describes goes. */

/* As keel_field_prepare, at any time and on any thread: checks
 * name[0..name_len) (a token, RFC 9110 5.1) and value[0..value_len) (no
 * control character but HTAB, RFC 9110 5.5: no CR, LF or NUL; it may be
 * empty), refuses the same framing, connection and Date fields, and keeps
 * a copy of both, the field line and the name's token, so that HTTP/1.1
 * copies the line whole and HTTP/2 encodes it by its token as they do a
 * field prepared at load. KEEL_OK with *out the field, which belongs to
 * the caller: free it with keel_field_free once the last response it was
 * added to is over, that is after every on_log hook of its request has
 * run (the core and other modules' hooks read a response's fields until
 * then, and the module's own hook may run before theirs: free it from a
 * function that hook posts with keel_worker_post, or later), and before
 * the module is unloaded. KEEL_ERR_INVAL for a NULL `out`, name or value, or a name
 * or value that may not be sent (*out NULL); KEEL_ERR_NOMEM (*out NULL).
 * Any thread. */
KEEL_FN(int, field_make,
        (const char *name, size_t name_len, const char *value, size_t value_len,
         const keel_prepared_field **out),
        (name, name_len, value, value_len, out))

/* Frees a field keel_field_make made; NULL is nothing. Never a field of
 * keel_field_prepare (the core frees those). The pointer is const as
 * keel_field_make hands it out, for keel_response_fields_add's arrays.
 * Any thread. */
KEEL_VFN(field_free, (const keel_prepared_field *field), (field))
#endif /* KEEL__WANT(12) */

#if KEEL__WANT(13)
/* ABI 1.13: entries are appended below this line, each with its section
 * comment (what it is for, ownership, thread, errors). */

/* ---- HTTP: fields the caller vouches for, in one call (ABI 1.13) ----------
 * A module relaying fields it has already parsed and checked (a reverse
 * proxy's or FastCGI's upstream response head) would have
 * keel_response_header_add measure, check and copy each name and value
 * again, one call and one allocation a field. Here the caller hands
 * views it vouches for, with the names' tokens when it classified them,
 * and the core copies them all into the request in one allocation. */

/* Adds fields[0..n) to the end of res's header section, in order, as n
 * calls of keel_response_header_add would, without checking them. Each
 * entry's name and value are views (name.ptr/len, value.ptr/len; neither
 * need be NUL-terminated, both are copied during the call); line and
 * line_len are not read (the copy has no field line); token is 1 + the
 * name's keel_header_token (keel/header_tokens.h) when the caller
 * classified the name (1 for a name it found unknown), or 0 when it did
 * not (a token this host's list does not have counts as 0). The caller
 * VOUCHES that every name is a token (RFC 9110 5.6.2: not empty, tchar
 * only), every value holds no control character but HTAB (RFC 9110 5.5:
 * no CR, LF, NUL or DEL; obs-text and an empty value are allowed) and
 * every nonzero token is the name's. A field the caller lies about is
 * not refused: release builds do not look, and it reaches the client as
 * it is (a CR LF in a value splits the response); debug builds (without
 * NDEBUG) and AddressSanitizer builds abort on it. Framing and
 * connection fields (Content-Length, Transfer-Encoding, Connection,
 * Keep-Alive, Proxy-Connection) are taken as keel_response_header_add's
 * are: kept in the list (keel_response_header, keel_response_body_length
 * and head filters see them) until the head is sent, then taken out and
 * written by the protocol. The array and the bytes it points to are the
 * caller's, read during the call only. `flags`: 0 (none are defined).
 * KEEL_OK (n 0 included); KEEL_ERR_INVAL for a NULL res, a NULL array
 * with n > 0 or unknown flags; KEEL_ERR_STATE once the head was sent;
 * KEEL_ERR_NOMEM. On an error nothing was added. Worker thread of the
 * request. */
KEEL_FN(int, response_fields_addn,
        (keel_response * res, const keel_field *fields, size_t n, unsigned flags),
        (res, fields, n, flags))

/* ---- HTTP: log field names prepared at load (ABI 1.13) ---------------------
 * keel_request_set_log_field checks its name byte by byte, copies it into
 * the request and compares it with the fields already set, on every
 * request. A module that sets the same few names on every request (the
 * proxy's upstream_addr, upstream_status, upstream_response_time)
 * prepares each once at load and sets the field by pointer: the name is
 * neither checked nor copied again. A field set by a prepared name and
 * one set by the same name as a string are the same field. */

/* Checks `name` (NUL-terminated, 1..32 bytes of a-z, 0-9 and '_', as
 * keel_request_set_log_field takes) and keeps a copy: KEEL_OK with *out
 * the name, which the core owns and frees with the module (the module
 * never frees it); KEEL_ERR_INVAL for a NULL module, name or out, or a
 * bad name (*out NULL); KEEL_ERR_STATE after load; KEEL_ERR_NOMEM. From
 * the module's load only (main thread). */
KEEL_FN(int, log_name_prepare, (keel_module * m, const char *name, const keel_log_name **out),
        (m, name, out))

/* As keel_request_set_log_field(req, the prepared name, value, len):
 * value[0..len) copied into the request, replacing the value an earlier
 * call gave the same name (prepared or as a string); fields keep the
 * order of their first setting; keel_request_log_field and
 * keel_request_log_field_at see it by its name. KEEL_OK; KEEL_ERR_INVAL
 * for a NULL req or name, a NULL value with len > 0 or a value over
 * 4,096 bytes; KEEL_ERR_STATE once the log phase ran; KEEL_ERR_NOMEM.
 * From a filter or a handler, until the response's end (worker thread of
 * the request). */
KEEL_FN(int, request_set_log_field_named,
        (keel_request * req, const keel_log_name *name, const char *value, size_t len),
        (req, name, value, len))
#endif /* KEEL__WANT(13) */
