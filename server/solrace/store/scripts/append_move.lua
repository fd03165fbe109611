-- append_move: append one racer's move and its room event, atomically.
-- KEYS[1] meta (TTL anchor)  KEYS[2] ver  KEYS[3] events  KEYS[4] keyset
-- KEYS[5] log  [KEYS[6] places counter, only when this move finishes the game]
-- ARGV[1] expected log length (the move's sequence number)
-- ARGV[2] log entry bytes  ARGV[3] event bytes (both opaque)
-- Returns {accepted (1/0), log length, version (0 if refused), place (0 if none)}.
local len = redis.call('LLEN', KEYS[5])
if len ~= tonumber(ARGV[1]) then
  -- stale or duplicate sequence number: write nothing, report where the log is
  return {0, len, 0, 0}
end
local v = append_event(KEYS[2], KEYS[3], ARGV[3])
len = redis.call('RPUSH', KEYS[5], ARGV[2])
local written = {KEYS[2], KEYS[3], KEYS[5]}
if len == 1 then
  -- first entry: the log key was just created; record it so expire_room finds it
  redis.call('SADD', KEYS[4], KEYS[5])
  written[#written + 1] = KEYS[4]
end
local place = 0
if #KEYS >= 6 then
  place = redis.call('INCR', KEYS[6])
  written[#written + 1] = KEYS[6]
  if place == 1 then
    redis.call('SADD', KEYS[4], KEYS[6])
    written[#written + 1] = KEYS[4]
  end
end
inherit_ttl(KEYS[1], written)
return {1, len, v, place}
