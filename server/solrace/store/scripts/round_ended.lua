-- round_ended: the last round whose race_over is stored, as far as the store can
-- tell: `over`, unless a proof raised it (reveal_round.lua: `revealed` in closed at
-- or past it), then 0 (none known: the round the store holds under way may be any
-- one before it, its race_over still to come).
-- KEYS[1] over  KEYS[2] closed
local over = tonumber(redis.call('GET', KEYS[1]) or '0')
local proved = tonumber(redis.call('HGET', KEYS[2], 'revealed') or '0')
if proved >= over then
  return 0
end
return over
