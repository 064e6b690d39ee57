-- wrk script for bench/overhead.py and bench/semantic_cache_speed.py: POST a JSON body with an
-- optional bearer key — a fixed BODY, or with @FILE a new body on every request, cycling through
-- FILE's lines — then print one machine-readable line with the latency percentiles (microseconds).
--   wrk ... -s bench/wrk_post.lua URL -- KEY BODY|@FILE
local bodies = {}
local next_body = 1

init = function(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  if args[1] ~= nil and args[1] ~= "" then
    wrk.headers["Authorization"] = "Bearer " .. args[1]
  end
  if string.sub(args[2], 1, 1) == "@" then
    for line in io.lines(string.sub(args[2], 2)) do
      bodies[#bodies + 1] = line
    end
  else
    wrk.body = args[2]
  end
end

request = function()
  if #bodies == 0 then
    return wrk.format()
  end
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
