-- set_token: record a racer's token digest (never the token itself).
-- KEYS[1] meta (TTL anchor)  KEYS[2] tokens hash
-- ARGV[1] racer id  ARGV[2] sha256 hex of the token
-- A script only so that a hash created after expire_room inherits the room's TTL.
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
inherit_ttl(KEYS[1], {KEYS[2]})
return 1
