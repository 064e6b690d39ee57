-- wrk script for bench/semantic_cache_speed.py: POST a new chat question on every request,
-- cycling through a file of request bodies (one JSON body a line), then print one
-- machine-readable line with the latency percentiles (microseconds).
--   wrk ... -s bench/wrk_questions.lua URL -- KEY BODIES_FILE
local bodies = {}
local next_body = 1

init = function(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. args[1]
  for line in io.lines(args[2]) do
    bodies[#bodies + 1] = line
  end
end

request = function()
  local body = bodies[next_body]
  next_body = next_body % #bodies + 1
  return wrk.format(nil, nil, nil, body)
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests": %d, "duration_us": %d, "p50_us": %.1f, "p90_us": %.1f, "p99_us": %.1f, ' ..
    '"mean_us": %.1f, "errors": %d, "non2xx": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.mean, e.connect + e.read + e.write + e.timeout, e.status))
end
