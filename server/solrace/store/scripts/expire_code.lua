-- expire_code: the global join code key follows its room's expiry, if it still names
-- that room (once expired, a code may be drawn again by another room: that room's
-- key must not get this one's expiry).
-- KEYS[1] code:<CODE>  ARGV[1] the room id  ARGV[2] the TTL in milliseconds
-- ARGV[3] 'set': exactly that TTL (Store.expire_room); 'extend': only a longer one (a
--   settle). The code is in another slot than its room, so a settle reads the room's
--   expiry and writes the code's in two steps; a settle running late (its node paused
--   between them, another node's rematch in between) could otherwise put a finished
--   round's hour on the code of a round that has a day. A code outliving its room is
--   harmless: it names a room that is gone (unknown_room) until it expires.
-- Returns 1 if set, 0 if the code names another room or none, or was not shortened.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local ttl = tonumber(ARGV[2])
if ARGV[3] == 'extend' then
  local now = redis.call('PTTL', KEYS[1])
  if now >= ttl then
    return 0
  end
end
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
