// cpp — a module written in C++ (built as C++20, or C++17 where that is all
// the compiler has), to keep <keel/keel.h> and keel_add_module() usable
// from C++ under -Wall -Wextra -Werror. It serves
//
//     GET /cpp/:name   "Hello, NAME, from C++ (request N on worker W)"
//
// with the greeting from its config:
//
//     [cpp]
//     greeting = Hello
//
// and, for the sized structs a module fills: a filter that adds
// "X-Cpp: yes" to every response, a counter cpp_requests_total, a
// protocol "cpp_probe" (logs "cpp: probe connected", then closes) and
//
//     GET /cppconnect/:port  connects to 127.0.0.1:PORT with keel_connect_options
//                            (202; "cpp: connect failed: DETAIL" on error)
//
// It is built with -Wmissing-field-initializers and
// -Wzero-as-null-pointer-constant under -Werror (tests/CMakeLists.txt):
// the definitions sit between KEEL_DESIGNATED_BEGIN and _END.
//
// What it shows: module-wide data owned by a C++ object (made in load,
// deleted in unload, also when load fails); per-worker state that is a C++
// object constructed in the zeroed block keel allocates (placement new in
// start, destructor in stop); a module-wide count behind keel/util.h's
// mutex (the header-only helpers compile as C++ too); and no exception
// ever crossing back into C.
#include <keel/keel.h>
#include <keel/util.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>

namespace
{

// Read once in load, shared read-only by every worker.
class Greeter
{
  public:
    explicit Greeter(std::string greeting) : greeting_(std::move(greeting)) {}

    std::string greet(const keel_str &name, std::uint64_t request, unsigned worker) const
    {
        std::string out = greeting_;
        out += ", ";
        if (name.ptr != nullptr)
            out.append(name.ptr, name.len);
        out += ", from C++ (request " + std::to_string(request) + " on worker " +
               std::to_string(worker) + ")";
        return out;
    }

  private:
    std::string greeting_;
};

// One per worker, touched only on that worker's thread.
class WorkerCounter
{
  public:
    std::uint64_t next()
    {
        return ++served_;
    }

  private:
    std::uint64_t served_ = 0;
};

keel_module *self;
keel_metric *requests;

void add_header(keel_request *, keel_response *res, void *)
{
    keel_response_header_set(res, "X-Cpp", "yes");
}

int probe_open(keel_conn *conn, void *)
{
    keel_log(self, KEEL_LOG_INFO, "probe connected");
    keel_conn_close(conn);
    return KEEL_OK;
}

int probe_data(keel_conn *, const char *, std::size_t len, std::size_t *consumed)
{
    *consumed = len;
    return KEEL_OK;
}

void connect_failed(keel_worker *worker, int status, void *)
{
    keel_log(self, KEEL_LOG_INFO, "connect failed: %s: %s", keel_strerror(status),
             keel_connect_error_detail(worker));
}

KEEL_DESIGNATED_BEGIN
const keel_http_filter filter = {
    .size = sizeof(keel_http_filter), .name = "cpp", .on_response_head = add_header};
const keel_protocol probe = {.size = sizeof(keel_protocol),
                             .name = "cpp_probe",
                             .on_open = probe_open,
                             .on_data = probe_data};
const keel_metric_desc requests_desc = {.size = sizeof(keel_metric_desc),
                                        .name = "cpp_requests_total",
                                        .help = "Requests the C++ module answered",
                                        .type = KEEL_METRIC_COUNTER};
KEEL_DESIGNATED_END

int connect_route(keel_request *req, keel_response *res, void *)
{
    keel_str port = keel_request_param(req, "port");
    std::string digits(port.ptr != nullptr ? port.ptr : "", port.len);
    KEEL_DESIGNATED_BEGIN
    keel_connect_options options = {
        .size = sizeof(keel_connect_options),
        .host = "127.0.0.1",
        .port = static_cast<unsigned>(std::strtoul(digits.c_str(), nullptr, 10)),
        .protocol = "cpp_probe",
        .on_error = connect_failed};
    KEEL_DESIGNATED_END
    int rc = keel_conn_connect(keel_request_worker(req), &options, nullptr);
    if (rc != KEEL_OK)
        return rc;
    return keel_response_send_status(res, 202);
}

// Requests served by every worker together: module-wide state, so guarded.
keel_mutex served_lock = KEEL_MUTEX_INIT;
std::uint64_t served_total;

int hello(keel_request *req, keel_response *res, void *userdata)
{
    const auto *greeter = static_cast<const Greeter *>(userdata);
    keel_worker *worker = keel_request_worker(req);
    keel_mutex_lock(&served_lock);
    served_total++;
    keel_mutex_unlock(&served_lock);
    keel_metric_add(worker, requests, 1);
    auto *counter = static_cast<WorkerCounter *>(keel_worker_state(worker, self));
    try {
        std::string body = greeter->greet(keel_request_param(req, "name"), counter->next(),
                                          keel_worker_id(worker));
        keel_response_header_set(res, "Content-Type", "text/plain");
        return keel_response_send_copy(res, body.data(), body.size());
    } catch (const std::exception &) {
        // std::bad_alloc, in practice: a C caller cannot unwind.
        return KEEL_ERR_NOMEM;
    }
}

int cpp_load(keel_module *module)
{
    self = module;
    const char *greeting = nullptr;
    int rc = keel_config_string(module, "greeting", "Hello", &greeting);
    if (rc != KEEL_OK)
        return rc;
    auto *greeter = new (std::nothrow) Greeter(greeting);
    if (greeter == nullptr)
        return KEEL_ERR_NOMEM;
    rc = keel_route_add(module, "GET", "/cpp/:name", hello, greeter);
    if (rc == KEEL_OK)
        rc = keel_route_add(module, "GET", "/cppconnect/:port", connect_route, nullptr);
    if (rc == KEEL_OK)
        rc = keel_http_filter_add(module, &filter);
    if (rc == KEEL_OK)
        rc = keel_protocol_register(module, &probe);
    if (rc == KEEL_OK)
        rc = keel_metric_register(module, &requests_desc, &requests);
    if (rc != KEEL_OK) {
        delete greeter; // unload is not called when load fails
        return rc;
    }
    keel_module_set_data(module, greeter);
    return KEEL_OK;
}

void cpp_unload(keel_module *module)
{
    keel_log(module, KEEL_LOG_DEBUG, "served %llu requests", (unsigned long long)served_total);
    delete static_cast<Greeter *>(keel_module_data(module));
}

int cpp_start(keel_module *, keel_worker *, void *state)
{
    new (state) WorkerCounter();
    return KEEL_OK;
}

void cpp_stop(keel_module *, keel_worker *, void *state)
{
    static_cast<WorkerCounter *>(state)->~WorkerCounter();
}

} // namespace

KEEL_MODULE(cpp, .version = "1.0.0", .worker_state_size = sizeof(WorkerCounter), .load = cpp_load,
            .start = cpp_start, .stop = cpp_stop, .unload = cpp_unload);

// An embedder declares a compiled-in descriptor this way; it must compile
// in C++ too (and agree with the definition above).
KEEL_MODULE_DECLARE(cpp);
