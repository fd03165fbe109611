-- expire_code: the global join code key follows its room's expiry, if it still names
-- that room (once expired, a code may be drawn again by another room: that room's
-- key must not get this one's expiry).
-- KEYS[1] code:<CODE>  ARGV[1] the room id  ARGV[2] the TTL in milliseconds
-- Returns 1 if set, 0 if the code names another room or none.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
