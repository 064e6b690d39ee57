-- wrk script for bench/overhead.py: POST a fixed JSON body with an optional bearer key,
-- then print one machine-readable line with the latency percentiles (microseconds).
--   wrk ... -s bench/wrk_post.lua URL -- KEY BODY
init = function(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  if args[1] ~= nil and args[1] ~= "" then
    wrk.headers["Authorization"] = "Bearer " .. args[1]
  end
  wrk.body = args[2]
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests": %d, "duration_us": %d, "p50_us": %.1f, "p90_us": %.1f, "p99_us": %.1f, ' ..
    '"mean_us": %.1f, "errors": %d, "non2xx": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.mean, e.connect + e.read + e.write + e.timeout, e.status))
end
