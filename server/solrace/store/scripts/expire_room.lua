-- expire_room, step 1: set the TTL on the room's fixed keys and read its key set and
-- join code, in one atomic step (see Store.expire_room for why this is race-free).
-- KEYS[1] meta (the TTL anchor: first, as every script checks it)  KEYS[2] code
-- then the other fixed keys (RoomKeys.fixed: ver, chain, events, tokens, nodes, over,
-- closed), the
-- key set LAST (KEYS[#KEYS])
-- ARGV[1] the TTL in milliseconds
-- Returns {members of the key set, the join code or nil}.
-- A script rather than MULTI/EXEC: the same atomic step, one round trip, and valid on
-- Redis Cluster (every key is named in KEYS and shares the room's hash tag), where
-- redis-py's transactional cluster pipeline cannot run these commands.
for _, key in ipairs(KEYS) do
  redis.call('PEXPIRE', key, ARGV[1])
end
return {redis.call('SMEMBERS', KEYS[#KEYS]), redis.call('GET', KEYS[2])}
