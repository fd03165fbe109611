-- append_event: optimistic append of one room-level event.
-- KEYS[1] meta (TTL anchor)  KEYS[2] ver  KEYS[3] events  KEYS[4] chain
-- ARGV[1] expected version, or '' for "append whatever the version"
-- ARGV[2] event bytes (opaque)  ARGV[3] the event's id (lib.lua, append_event)
-- Returns {1, new_version} or {0, current_version} (conflict: nothing written).
-- The appending node folds the event from the stream afterwards, links and all.
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if ARGV[1] ~= '' and tonumber(ARGV[1]) ~= current then
  return {0, current}
end
local v = append_event(KEYS[2], KEYS[3], KEYS[4], ARGV[2], ARGV[3])
inherit_ttl(KEYS[1], {KEYS[2], KEYS[3], KEYS[4]})
return {1, v}
