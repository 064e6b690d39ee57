-- A stream's progress, checkpointed on its hold (gateway/inflight.py) where every replica sees
-- it: if the hold is reclaimed unsettled, holds.lua queues the checkpoint to be charged. A hold
-- that is gone (settled, or reclaimed already) is not recreated.
-- KEYS: [1] the hold's hash. ARGV: the checkpoint (JSON). Returns 1 when written.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'checkpoint', ARGV[1])
return 1
