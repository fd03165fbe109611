-- settle_expiry: give the room's key set members the expiry of its TTL anchor.
-- KEYS[1] meta (the TTL anchor)  KEYS[2..] members of the key set (read by
-- expire_room.lua's step or Store.settle_expiry: every key named, one slot)
-- Returns the anchor's PTTL (-1: no expiry, -2: the room is gone).
-- The TTL is the anchor's *now*, not one the caller carries: a node that settles late
-- (after another node's rematch gave the room its lifetime back) copies the newer
-- expiry, never an older decision's.
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  for i = 2, #KEYS do
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
return ttl
