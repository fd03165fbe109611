-- round_ended: the last round whose race_over is stored, as far as the store can
-- tell: `over`, unless a proof raised it (reveal_round.lua: `revealed` in closed at
-- or past it); then `ended`, the last round a race_over had raised it to before the
-- proof (0: none), the round the store holds under way being any one after that,
-- its race_over still to come. (A race_over of a round at or below a proof's `over`
-- raises nothing, so is not counted until a later one raises `over` past the proof.)
-- KEYS[1] over  KEYS[2] closed
local over = tonumber(redis.call('GET', KEYS[1]) or '0')
local proved = tonumber(redis.call('HGET', KEYS[2], 'revealed') or '0')
if proved >= over then
  return tonumber(redis.call('HGET', KEYS[2], 'ended') or '0')
end
return over
