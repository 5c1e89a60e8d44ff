-- bench.lua — the wrk script of tests/bench/run.sh.
--
-- The request is chosen when the script loads (wrk decides then whether to
-- call request() at all), from the environment:
--   BENCH_MODE=plain                 GET /, wrk's own prebuilt request
--   BENCH_MODE=pipeline BENCH_ARG=16 16 GET / in one write (HTTP/1.1 pipelining)
--   BENCH_MODE=post BENCH_ARG=4096   POST /echo with a 4096-byte body
-- done() prints one machine-readable line that run.sh parses.

local mode = os.getenv("BENCH_MODE") or "plain"
local arg = tonumber(os.getenv("BENCH_ARG") or "16")

if mode == "pipeline" then
   local batch
   init = function(args)
      local r = {}
      for i = 1, arg do
         r[i] = wrk.format("GET", "/")
      end
      batch = table.concat(r)
   end
   -- wrk parses the returned string, counts the requests in it and then
   -- expects that many responses per write.
   request = function()
      return batch
   end
elseif mode == "post" then
   wrk.method = "POST"
   wrk.path = "/echo"
   wrk.body = string.rep("x", arg)
   wrk.headers["Content-Type"] = "application/octet-stream"
end

done = function(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "WRK_RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d " ..
      "connect=%d read=%d write=%d status=%d timeout=%d\n",
      summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
      e.connect, e.read, e.write, e.status, e.timeout))
end
