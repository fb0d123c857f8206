-- wrk script: replays pre-signed deliveries, one per request; each thread
-- takes every Nth line of the file, so every request is a distinct event.
--   wrk -t T ... -s events.lua URL -- EVENTS_FILE PATH T
-- EVENTS_FILE: lines of body<TAB>name<TAB>value... (inbox-receiver sign --format tsv).

local threads = {}
local counter = 0

function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  local file, path, stride = args[1], args[2], tonumber(args[3])
  requests, n, wrapped = {}, 0, 0
  local i = 0
  for line in io.lines(file) do
    if i % stride == tid then
      local fields = {}
      for f in string.gmatch(line, "[^\t]+") do fields[#fields + 1] = f end
      local headers = {}
      for k = 2, #fields - 1, 2 do headers[fields[k]] = fields[k + 1] end
      n = n + 1
      requests[n] = wrk.format("POST", path, headers, fields[1])
    end
    i = i + 1
  end
  idx = 0
end

function request()
  idx = idx + 1
  if idx > n then idx, wrapped = 1, wrapped + 1 end
  return requests[idx]
end

function done(summary, latency, requests)
  local replays = 0
  for _, t in ipairs(threads) do replays = replays + t:get("wrapped") end
  io.write(string.format("replays: %d\n", replays))
end
